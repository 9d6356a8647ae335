// What a webhook step's failed TLS handshake says: Node hands over a certificate refusal with a short
// message of its own, but OpenSSL's errors with its raw error string (library, function, source file
// and a newline). Both become a cause and its code. Most come before the handshake is done, when
// nothing was sent; under TLS 1.3 a receiver's refusal of the client (it wants a client certificate)
// comes after the client has finished its part and sent the request.

/** Certificate checks Node reports by OpenSSL's verify code (X509_V_ERR_* without the prefix), and the host name check. */
const CERTIFICATE_CODES = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'CERT_CHAIN_TOO_LONG',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'INVALID_CA',
  'INVALID_PURPOSE',
  'PATH_LENGTH_EXCEEDED',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

const NO_SHARED_VERSION = 'the receiver and Sluice share no TLS version (Sluice speaks TLS 1.2 and 1.3)';

/** OpenSSL's reasons that have a plainer cause. */
const HANDSHAKE_CAUSES: Readonly<Record<string, string>> = {
  ERR_SSL_WRONG_VERSION_NUMBER: 'the receiver did not answer in TLS (is it plain HTTP at this port? then the url is http://)',
  ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION: NO_SHARED_VERSION,
  ERR_SSL_UNSUPPORTED_PROTOCOL: NO_SHARED_VERSION,
  ERR_SSL_NO_PROTOCOLS_AVAILABLE: NO_SHARED_VERSION,
  ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED: 'the receiver requires a client certificate, which Sluice does not present',
};

export interface TlsFailure {
  /** Node's code (CERT_HAS_EXPIRED, ERR_TLS_CERT_ALTNAME_INVALID, ERR_SSL_WRONG_VERSION_NUMBER, …). */
  readonly code: string;
  /** What failed, in words, with no full stop: the step's message puts it in its sentence. */
  readonly cause: string;
}

/** The TLS failure `error` is, or undefined for any other error. */
export function tlsFailureOf(error: unknown): TlsFailure | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, reason } = error as NodeJS.ErrnoException & { reason?: unknown };
  if (typeof code !== 'string') return undefined;
  if (CERTIFICATE_CODES.has(code)) {
    return { code, cause: `the receiver's TLS certificate was refused (${code}: ${error.message}); Sluice trusts the system's certificate authorities and those in NODE_EXTRA_CA_CERTS` };
  }
  if (!code.startsWith('ERR_SSL_')) return undefined;
  return { code, cause: `${HANDSHAKE_CAUSES[code] ?? `the TLS handshake failed: ${typeof reason === 'string' && reason !== '' ? reason : code}`} (${code})` };
}
