// What every peer server process shares with `sluice serve`: its command-line flags, the
// `listening on http://127.0.0.1:<port>` announcement the harness waits for, and a clean stop on SIGTERM.

import { parseArgs } from 'node:util';

export interface PeerArgs {
  readonly port: number;
  /** Where durable state goes (peers without storage ignore it). */
  readonly dataDir: string;
  /** The `whsec_` secret the pre-signed requests were signed with. */
  readonly secret: string;
}

export function parsePeerArgs(argv: readonly string[] = process.argv.slice(2)): PeerArgs {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      port: { type: 'string', default: '0' },
      'data-dir': { type: 'string', default: '' },
      secret: { type: 'string' },
    },
  });
  if (values.secret === undefined) throw new Error('--secret whsec_... is required');
  return { port: Number(values.port), dataDir: values['data-dir'], secret: values.secret };
}

/** The line the harness (and a person) waits for; same wording as `sluice serve`. */
export function announceListening(port: number): void {
  process.stdout.write(`listening on http://127.0.0.1:${port}\n`);
}

/** Runs `close` once on SIGTERM or SIGINT, then exits. */
export function stopOnSignal(close: () => void | Promise<void>): void {
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void Promise.resolve()
      .then(close)
      .finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

/** Signature tolerance of the Standard Webhooks scheme (DESIGN §6.2), shared by the hand-written peers. */
export const TIMESTAMP_TOLERANCE_SEC = 300;
