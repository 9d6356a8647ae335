// Whether a runner the runtime reaches in plaintext (no --runner-ca) answers a TLS handshake, asked
// when the runtime logs that it cannot reach it (connect-runner.ts).

import { isIP } from 'node:net';
import { connect } from 'node:tls';
import { parseListenAddress } from '../../hook-runner/listen-address.ts';

/** How long the handshake may take before the answer counts as no. */
export const TLS_ANSWER_CHECK_MS = 2_000;

/**
 * Resolves true once a TLS handshake with `address` (host:port) completes, whatever its
 * certificate; false otherwise. A runner started with --tls-cert drops plaintext calls, and grpc-js
 * then says only "Failed to connect", which reads as a runner that is down.
 */
export function answersTls(address: string, timeoutMs = TLS_ANSWER_CHECK_MS): Promise<boolean> {
  let target;
  try {
    target = parseListenAddress(address);
  } catch {
    return Promise.resolve(false);
  }
  if (target.kind !== 'tcp') return Promise.resolve(false);
  const { host, port } = target;
  return new Promise((resolve) => {
    // Only asking whether it speaks TLS: the certificate is not judged, and no name is sent for an IP (RFC 6066).
    const socket = connect({ host, port, rejectUnauthorized: false, ALPNProtocols: ['h2'], ...(isIP(host) === 0 ? { servername: host } : {}) });
    const settle = (answered: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answered);
    };
    const timer = setTimeout(() => settle(false), timeoutMs);
    // Neither keeps a stopping runtime alive.
    timer.unref();
    socket.unref();
    socket.once('secureConnect', () => settle(true));
    socket.once('error', () => settle(false));
    socket.once('close', () => settle(false));
  });
}
