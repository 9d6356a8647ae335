// How the runtime's gRPC channel to a runner is secured: plaintext, or TLS checked against
// --runner-ca (runnerChannel).

import { credentials, type ChannelCredentials, type ChannelOptions } from '@grpc/grpc-js';
import { isIP } from 'node:net';
import { checkServerIdentity } from 'node:tls';
import { parseListenAddress } from '../../hook-runner/listen-address.ts';

/** The server name a TLS hello to a runner named by IP carries (a runner serves one certificate, whatever the name). */
export const RUNNER_TLS_SERVER_NAME = 'sluice-hook-runner';

/** The host of a `host:port` address when it is an IP address, else undefined (a name, a unix socket, or not an address). */
function ipHostOf(address: string): string | undefined {
  try {
    const parsed = parseListenAddress(address);
    return parsed.kind === 'tcp' && isIP(parsed.host) !== 0 ? parsed.host : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The channel's credentials and options. A runner named by IP address is checked against that IP
 * (its certificate must name it), while the TLS hello names RUNNER_TLS_SERVER_NAME: grpc-js would
 * send the IP as the server name, which RFC 6066 forbids and Node warns of (DEP0123) on stderr,
 * outside the JSON log, at every start.
 */
export function runnerChannel(address: string, tlsCa: Buffer | undefined): { readonly credentials: ChannelCredentials; readonly options: ChannelOptions } {
  if (tlsCa === undefined) return { credentials: credentials.createInsecure(), options: {} };
  const ip = ipHostOf(address);
  if (ip === undefined) return { credentials: credentials.createSsl(tlsCa), options: {} };
  return {
    credentials: credentials.createSsl(tlsCa, null, null, { checkServerIdentity: (_name, certificate) => checkServerIdentity(ip, certificate) }),
    options: { 'grpc.ssl_target_name_override': RUNNER_TLS_SERVER_NAME },
  };
}
