// What lmdb-js (3.5) does when a commit fails (a full disk, an I/O error), and how both processes
// live through it. It rejects every write of the failed batch or transaction with an error whose
// `commitError` is the commit's own promise, which it rejects too, later, with the underlying error
// (kriszyp/lmdb-js#368). The writes Sluice made are handled by their callers (a 5xx, a stalled
// run), but nobody holds the commit's promise, nor the writes lmdb-js makes for itself: without
// help, the first such rejection ends the process, and a full disk took the runtime and the
// hook-runner down with it. Each write's failure settles its commit's promise (FlushWatch.watch), and
// the process-wide guard logs the strays; any other unhandled rejection still ends the process.
// (Shared by the runtime, whose ledger imports it, and the hook-runner, which imports no runtime code.)

/** Whether an unhandled rejection is one of lmdb-js's strays for a failed commit (it carries `commitError`). */
export function isLedgerCommitFailure(reason: unknown): boolean {
  return reason instanceof Error && 'commitError' in reason;
}

/** Handles the commit's own rejection that a write's failure carries, if it does. */
export function settleCommitFailure(error: unknown): void {
  const commitError = (error as { commitError?: unknown } | null)?.commitError;
  if (commitError instanceof Promise) commitError.catch(() => undefined);
}

/** The text of a failed commit's underlying error, read from its `commitError` once that settles. */
export async function commitFailureCause(error: unknown): Promise<string> {
  const commitError = (error as { commitError?: unknown } | null)?.commitError;
  if (!(commitError instanceof Promise)) return 'unknown cause';
  return commitError.then(() => 'unknown cause', causeText);
}

/** The text of a failed commit's underlying error, as lmdb-js gives it (an Error, or a bare code). */
const causeText = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause));

/**
 * Failed commits LMDB had already made visible: with overlappingSync it writes a commit's pages and
 * its meta page (readers see it; it outlives a process crash), then fdatasyncs, and a failed
 * fdatasync (EIO, or ENOSPC from thin or network storage) rejects the commit's writes all the same.
 * Such a write took; whether its data reached the disk is unknown (FlushWatch tells them apart).
 */
const visibleFailures = new WeakSet<object>();

/** Marks a failed commit's write as one that took before its sync failed (FlushWatch). */
export function markTookUnsynced(error: unknown): void {
  if (typeof error === 'object' && error !== null) visibleFailures.add(error);
}

/** Whether a write's commit failure came after LMDB had made it visible: it took, and its outcome on disk is unknown. */
export const tookUnsynced = (error: unknown): boolean => typeof error === 'object' && error !== null && visibleFailures.has(error);

/**
 * What was committed may not be on disk: LMDB's sync, asked for after a failed commit, failed, or a
 * commit's own sync failed, after which the store confirms nothing more (flush-watch.ts). A write
 * that waited for it took, and it may or may not outlive a crash.
 */
export class UnconfirmedFlushError extends Error {
  constructor(cause: unknown) {
    super(`committed writes could not be confirmed on disk: ${causeText(cause)}`, { cause });
    this.name = 'UnconfirmedFlushError';
  }
}

/** The shortest time between two logged strays: a full disk fails every write, and each would log. */
export const STRAY_LOG_INTERVAL_MS = 10_000;

/** The end of a plain log line emitted by throttledStrays: how many it held back, when any. */
export const heldBackNote = (heldBack: number): string => (heldBack > 0 ? ` (${heldBack} more since the last line)` : '');

/**
 * `emit` for the first value, then at most once per `intervalMs` (STRAY_LOG_INTERVAL_MS unless
 * given), told how many values were held back since the last one it heard. Intervals are measured
 * on the monotonic clock by default: on the wall clock, one set back an hour held every line back
 * for that hour (a failing disk's commits among them).
 */
export function throttledStrays<T>(emit: (value: T, heldBack: number) => void, now: () => number = () => performance.now(), intervalMs = STRAY_LOG_INTERVAL_MS): (value: T) => void {
  let loggedAt = Number.NEGATIVE_INFINITY;
  let heldBack = 0;
  return (value) => {
    const at = now();
    if (at - loggedAt < intervalMs) {
      heldBack += 1;
      return;
    }
    emit(value, heldBack);
    loggedAt = at;
    heldBack = 0;
  };
}

/**
 * Installs the guard for this process (call once, at startup); `log` hears each failed commit once,
 * with the text of its underlying error (ENOSPC, EFBIG, EIO) once its commit's own promise has told
 * it, and each unconfirmed flush no caller awaited. A failed commit leaves more than one stray (two
 * for one write, measured: the write's promise and lmdb-js's own), all carrying that commit's
 * promise: those after the first are passed over, so that counts of what was held back count
 * commits. `isStray` may widen what counts (the runtime adds writes its disk floor refused).
 */
export function guardCommitFailures(log: (error: Error, cause: string) => void, isStray: (reason: unknown) => boolean = isLedgerCommitFailure): void {
  const heard = new WeakSet<Promise<unknown>>();
  process.on('unhandledRejection', (reason) => {
    // A flush wait no caller awaits yet (it reads a write's `flushed` before awaiting the write).
    if (reason instanceof UnconfirmedFlushError) return log(reason, causeText(reason.cause));
    if (!isStray(reason)) throw reason;
    const commitError = (reason as { commitError?: unknown }).commitError;
    if (commitError instanceof Promise) {
      if (heard.has(commitError)) return;
      heard.add(commitError);
    }
    const told = (cause: unknown): void => log(reason as Error, causeText(cause));
    if (commitError instanceof Promise) commitError.then(() => told(undefined), told);
    else told(undefined);
  });
}
