// A self-signed certificate and its key as PEM files, made with the system's openssl (the CI
// installs it): an EC P-256 key, valid two days, naming one IP address.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/** Writes `<name>.crt` and `<name>.key` into `dir` for `ip` and returns their paths. */
export function selfSigned(dir: string, name: string, ip = '127.0.0.1'): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', `/CN=${name}`, '-addext', `subjectAltName=IP:${ip}`, '-keyout', key, '-out', cert], { stdio: 'ignore' });
  return { cert, key };
}
