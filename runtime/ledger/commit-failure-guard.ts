// lmdb-js (3.5) rejects promises of its own that nobody holds when a commit fails (a full disk, an
// I/O error): one per write made inside the failed batch or transaction, and the commit's own
// (kriszyp/lmdb-js#368). The caller of every write Sluice makes gets its own rejection and handles
// it (a 5xx, a stalled run), so these strays are logged; without this guard the first one ended the
// process. Any other unhandled rejection still ends it, as it would without a handler.

import type { Logger } from '../log.ts';

/**
 * Whether an unhandled rejection is one of lmdb-js's strays for a failed commit: the error it gives
 * each write of the commit carries `commitError`, the commit's own promise, whose rejection the
 * guard then handles. Nothing else counts (a bug that merely passed through lmdb-js must still end
 * the process).
 */
export function isLedgerCommitFailure(reason: unknown): boolean {
  return reason instanceof Error && 'commitError' in reason;
}

/** Installs the guard for this process (call once, at startup). */
export function guardLedgerCommitFailures(logger: Logger): void {
  process.on('unhandledRejection', (reason) => {
    if (!isLedgerCommitFailure(reason)) throw reason;
    const commitError = (reason as { commitError?: unknown }).commitError;
    // The commit's own promise rejects later with the underlying error: it is the same failure.
    if (commitError instanceof Promise) commitError.catch(() => undefined);
    logger.error('ledger commit failed', { error: (reason as Error).message, stack: (reason as Error).stack });
  });
}
