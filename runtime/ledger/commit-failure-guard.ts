// lmdb-js (3.5) rejects promises of its own that nobody holds when a commit fails (a full disk, an
// I/O error): one per write made inside the failed batch or transaction, and the commit's own
// (kriszyp/lmdb-js#368). The caller of every write Sluice makes gets its own rejection and handles
// it (a 5xx, a stalled run), so these strays are logged; without this guard the first one ended the
// process. Any other unhandled rejection still ends it, as it would without a handler.

import type { Logger } from '../log.ts';

/** Whether an unhandled rejection is one of lmdb-js's strays for a failed commit. */
export function isLedgerCommitFailure(reason: unknown): boolean {
  if (!(reason instanceof Error)) return false;
  return 'commitError' in reason || /[\\/]node_modules[\\/]lmdb[\\/]/.test(reason.stack ?? '');
}

/** Installs the guard for this process (call once, at startup). */
export function guardLedgerCommitFailures(logger: Logger): void {
  process.on('unhandledRejection', (reason) => {
    if (!isLedgerCommitFailure(reason)) throw reason;
    const commitError = (reason as { commitError?: unknown }).commitError;
    // The commit's own promise rejects later with the underlying error: it is the same failure.
    if (commitError instanceof Promise) commitError.catch(() => undefined);
    logger.error('ledger commit failed', { error: reason instanceof Error ? reason.message : String(reason) });
  });
}
