// Why a listen failed, in words that say what to do. uWebSockets.js reports only that it could not
// listen; the same bind tried with node:net names the reason (the port taken, an address that is
// not this machine's, a privileged port), and is closed again at once.

import { createServer } from 'node:net';

const ADVICE: Readonly<Record<string, string>> = {
  EADDRINUSE: 'the port is in use (another Sluice, or another program, listens there): stop it, or choose another port with --port or SLUICE_PORT',
  EADDRNOTAVAIL: 'the address is not one of this machine\'s: choose another with --host or SLUICE_HOST (127.0.0.1 for this machine alone, 0.0.0.0 for every interface)',
  EACCES: 'a port below 1024 needs privileges this process does not have: choose a port of 1024 or more with --port or SLUICE_PORT',
};

/** The reason binding `host:port` fails, with what to do, or undefined when it can be bound now (or fails otherwise). */
export function listenFailureReason(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      const advice = ADVICE[error.code ?? ''];
      resolve(advice === undefined ? error.code : `${error.code}: ${advice}`);
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}
