// TLS for a runner reached over the network: its certificate and key (PEM files) for the runner,
// and for the runtime the CA (or the runner's own self-signed certificate) it checks the runner's
// certificate against. Without TLS the runner token and secret values cross the wire in cleartext.

import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';

/** A PEM file's bytes; `refuse` makes the error for a file that cannot be read or holds no PEM block of `label`. */
export function readPem(path: string, label: RegExp, what: string, refuse: (message: string) => Error): Buffer {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw refuse(`${what} ${path} cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}.`);
  }
  const text = bytes.toString('latin1');
  if (ENCRYPTED_KEY_PEM.test(text)) throw refuse(`${what} ${path} is encrypted with a passphrase; give the key unencrypted (openssl pkey -in it -out another file), readable only by the runner's user.`);
  if (!label.test(text)) throw refuse(`${what} ${path} holds no PEM block (-----BEGIN …-----).`);
  return bytes;
}

/** A certificate block. */
export const CERTIFICATE_PEM = /-----BEGIN CERTIFICATE-----/;
/** A key block sealed with a passphrase, which the runner cannot open unattended. */
const ENCRYPTED_KEY_PEM = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/;
/** A private key block (PKCS#8, RSA or EC). */
export const PRIVATE_KEY_PEM = /-----BEGIN (?:RSA |EC )?PRIVATE KEY-----/;

/**
 * The runner's certificate and key, read and checked to belong together (gRPC would only say
 * "key values mismatch" when binding) and the certificate to be valid at `nowMs` (no client accepts
 * it otherwise, and only the client would say so, call by call); `refuse` makes the error that names
 * the files. `keyReadableByOthers`: the key file's mode lets group or others read it (warned of,
 * not refused: a mounted secret is often 0644 in a container that runs nothing else).
 */
export function readServingPair(certFile: string, keyFile: string, refuse: (message: string) => Error, nowMs = Date.now()): { cert: Buffer; key: Buffer; keyReadableByOthers: boolean } {
  const cert = readPem(certFile, CERTIFICATE_PEM, 'The TLS certificate', refuse);
  const key = readPem(keyFile, PRIVATE_KEY_PEM, 'The TLS key', refuse);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert);
  } catch (error) {
    throw refuse(`The TLS certificate ${certFile} cannot be read as an X.509 certificate: ${(error as Error).message}.`);
  }
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key);
  } catch (error) {
    throw refuse(`The TLS key ${keyFile} cannot be read as a private key: ${(error as Error).message}.`);
  }
  if (!certificate.checkPrivateKey(privateKey)) throw refuse(`The TLS key ${keyFile} is not the key of the certificate ${certFile}: give the key the certificate was made for.`);
  const validFrom = Date.parse(certificate.validFrom);
  const validTo = Date.parse(certificate.validTo);
  if (nowMs > validTo) throw refuse(`The TLS certificate ${certFile} expired at ${new Date(validTo).toISOString()}: no client accepts it; give a renewed one.`);
  if (nowMs < validFrom) throw refuse(`The TLS certificate ${certFile} is not valid before ${new Date(validFrom).toISOString()}: no client accepts it until then (or this machine's clock is wrong).`);
  return { cert, key, keyReadableByOthers: (statSync(keyFile).mode & 0o044) !== 0 };
}
