// The runtime's guard for lmdb-js's failed commits (hook-runner/lmdb-commit-failure.ts says what
// lmdb-js does and why): a stray is logged and the process goes on; a failed write answers its
// caller (a 5xx, a stalled run), and the ledger settles its commit's own rejection (open-ledger.ts).
// A failed commit leaves strays (heard once per commit: guardCommitFailures), so a full disk under
// load would log one per commit: the guard logs the first, then at most one per
// STRAY_LOG_INTERVAL_MS (throttledStrays), counting the commits it held back, each line with the
// commit's own error (a full disk's ENOSPC). It is the one log line of a failed
// commit: the requests and runs it fails log theirs at debug (they answer 503, or stall and retry).
// Writes refused below the disk floor (disk-floor.ts) are handled as failed ones, without a line.

import { guardCommitFailures, isLedgerCommitFailure, throttledStrays, tookUnsynced, UnconfirmedFlushError } from '../../hook-runner/lmdb-commit-failure.ts';
import { RetryableError, writeFailedError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { DiskSpaceLowError } from '../../hook-runner/disk-floor.ts';

/** Whether nothing of a write was kept because it failed to commit or was refused below the disk floor (disk-floor.ts). */
export const isFailedWrite = (error: unknown): boolean => isLedgerCommitFailure(error) || error instanceof DiskSpaceLowError;

/**
 * The retryable 503 for a write of `what` the ledger could not complete: `write_failed` when it kept
 * nothing (isFailedWrite), `write_unconfirmed` when it took but its flush could not be confirmed (or
 * its commit failed in its own sync, after it took: tookUnsynced); undefined for any other error.
 */
export function failedWriteError(what: string, error: unknown): RetryableError | undefined {
  if (error instanceof DiskSpaceLowError) return diskLowWriteError(what);
  if (error instanceof UnconfirmedFlushError || tookUnsynced(error)) return unconfirmedWriteError(what);
  return isLedgerCommitFailure(error) ? writeFailedError(what) : undefined;
}

/** The retryable 503 `write_unconfirmed` for a write of `what` that took but that the disk could not confirm (UnconfirmedFlushError). */
export const unconfirmedWriteError = (what: string): RetryableError =>
  new RetryableError(
    'write_unconfirmed',
    `The ${what} was written, but the disk could not confirm it (an I/O error): it may have been stored. Look for it before sending it again, or send it again with the same id, which is refused with 409 if it was kept.`,
    5000,
  );

/** The retryable 503 `write_failed` for a write of `what` the disk floor refused: nothing of it was kept. */
export const diskLowWriteError = (what: string): RetryableError =>
  new RetryableError('write_failed', `The ${what} could not be stored: the server's disk is nearly full. Nothing of it was kept; try again later.`, 5000);

/** Installs the guard for this process (call once, at startup); `now` is injectable for tests. */
export function guardLedgerCommitFailures(logger: Logger, now: () => number = () => performance.now()): void {
  const logged = throttledStrays<{ error: Error; cause: string }>(({ error, cause }, heldBack) => {
    logger.error('ledger commit failed', { error: error.message, cause, stack: error.stack, ...(heldBack > 0 ? { more_since_last_logged: heldBack } : {}) });
  }, now);
  guardCommitFailures((error, cause) => {
    // A write the disk floor refused never reached storage; the floor logs its own line when it trips.
    if (error instanceof DiskSpaceLowError) return;
    logged({ error, cause });
  }, isFailedWrite);
}

/**
 * Logs what failed at error level, or at debug when the cause is a failed commit: the guard's
 * rate-limited line speaks for those, where a full disk would otherwise log a line for every
 * request, device message, run and retry it refuses.
 */
export function logFailure(logger: Logger, message: string, fields: Record<string, unknown>, error: unknown): void {
  const entry = { ...fields, error: String(error) };
  if (isFailedWrite(error)) logger.debug(message, entry);
  else logger.error(message, entry);
}
