// Waiting for an LMDB environment's flush without hanging on a failed commit. lmdb-js hands out
// the flush promise of its latest batch (as `root.flushed`, and as a write's own `flushed`), and a
// batch whose commit fails (a full disk) never settles it: only a commit that succeeds calls its
// resolvers, a batch's promise may be shared by writes that committed before the failure, and
// lmdb-js goes on handing the dead promise out until a write starts a new batch. A duplicate
// delivery or a committed API key waiting on one was never answered. Here, when a commit fails, a
// wait whose own write failed ends with that failure (a 503 to its request); every other wait (its
// write committed, or it waits for what is committed) asks LMDB to sync the environment and ends
// when that sync has put everything committed on disk: failing those too answered "nothing was
// kept" for events that were stored, and a client sending one again stored it twice. From a failed
// commit until a write issued after it has committed (a new batch, a live promise), every new wait
// asks for that sync too. A sync that fails ends its waits with UnconfirmedFlushError (lmdb-commit-failure.ts).
// A failed commit LMDB had already made visible (the newest commit readers see, read when lmdb-js
// tells of the failure, is past the last one that succeeded) is one whose own fdatasync failed: its
// writes took, their outcome on disk unknown (tookUnsynced). Linux may then mark the unwritten pages
// clean and let a later fsync succeed over them ("fsyncgate"), so no later sync is trusted: every
// wait, pending or new, ends unconfirmed, and the owner is told once (onSyncFailed) so that it can
// stop and let a restart reopen the store. A later commit LMDB made meanwhile can make a failure
// that kept nothing look visible too: then the process stops when it need not have. Two gaps are
// left (lmdb-js gives no commit's own id for certain): an empty transaction reports the id the next
// commit takes, and if that commit is already visible when the report is read and then fails its
// sync, that failure looks like one that kept nothing (on a failing disk the next failure is told);
// and databases opened with transactionSync (openDB) commit without a report, so until the next
// reported commit a failure that kept nothing looks visible (a stop it did not need).
// (Shared by the runtime's ledger and the hook-runner's store, which imports no runtime code.)

import { commitFailureCause, isLedgerCommitFailure, markTookUnsynced, settleCommitFailure, UnconfirmedFlushError } from './lmdb-commit-failure.ts';

interface Waiter {
  /** The write whose flush this waits for; none for a wait on what is committed (`flushed()`). */
  readonly write: Promise<unknown> | undefined;
  readonly done: () => void;
  readonly fail: (error: unknown) => void;
  /** A commit failure has set this wait on its way (a sync, or its write's failure): once is enough. */
  settling: boolean;
}

export interface FlushSource {
  /** lmdb-js's `root.flushed`. */
  readonly flushed: () => PromiseLike<unknown>;
  /** lmdb-js's `root.sync(callback)`: fsyncs what is committed, then calls back (with an error if it failed). */
  readonly sync: (done: (error?: unknown) => void) => void;
  /** The id of the newest commit readers see (LMDB's meta page), whether or not it was synced. */
  readonly visibleTxnId: () => number;
  /**
   * Calls `listener` as each commit ends, in order, before its writes' promises settle: with the
   * commit's id when it succeeded (an empty transaction's is the id it would have had), undefined
   * when it failed.
   */
  readonly onCommitEnded: (listener: (txnId: number | undefined) => void) => void;
}

export class FlushWatch {
  readonly #source: FlushSource;
  readonly #waiting = new Set<Waiter>();
  readonly #watched = new WeakSet<Promise<unknown>>();
  /** Writes watched so far, numbered as they are issued. */
  #issued = 0;
  /** While set, the flush promises on offer may be dead: writes issued up to this number may share one. */
  #suspectUpTo: number | undefined;
  /** The newest commit that succeeded (a failed one visible past it took before its sync failed). */
  #lastCommitted: number;
  /** A failed commit was visible when lmdb-js told of it: from then on every failure counts as one. */
  #visibleFailure = false;
  /** Set once a commit's own sync failed: what every wait ends with from then on. */
  #syncFailure: Promise<UnconfirmedFlushError> | undefined;
  readonly #onSyncFailed: (cause: string) => void;

  /** `onSyncFailed`: told once, with LMDB's reason, when a commit's own sync failed (the class comment says why). */
  constructor(source: FlushSource, onSyncFailed: (cause: string) => void = () => undefined) {
    this.#source = source;
    this.#onSyncFailed = onSyncFailed;
    this.#lastCommitted = source.visibleTxnId();
    source.onCommitEnded((txnId) => {
      const visible = source.visibleTxnId();
      // An empty transaction reports an id it never committed (the next commit takes it): what is
      // visible caps it, and a commit already visible past this one does not count for it.
      if (txnId !== undefined) this.#lastCommitted = Math.max(this.#lastCommitted, Math.min(txnId, visible));
      // Told before the failed commit's writes are rejected and before any later commit is.
      else if (visible > this.#lastCommitted) this.#visibleFailure = true;
    });
  }

  /**
   * Call with every write's promise as it is issued: its outcome tells whether commits are failing,
   * and its own `flushed`, read after this, is waited for as `wait` does. A failed commit's own
   * rejection is settled with the write's (settleCommitFailure, lmdb-commit-failure.ts).
   */
  watch<T>(write: T): T {
    // lmdb-js answers the unconditional writes of one batch with one promise: it is watched once
    // (its `flushed` wrapped once, not in a getter per write).
    if (!(write instanceof Promise) || this.#watched.has(write)) return write;
    this.#watched.add(write);
    const seq = ++this.#issued;
    const own = (write as { flushed?: PromiseLike<unknown> }).flushed;
    if (own !== undefined) Object.defineProperty(write, 'flushed', { configurable: true, get: () => this.#wait(own, write) });
    write.then(
      () => {
        // Issued after the failure was seen: its batch is a new one, with a live flush promise.
        if (this.#suspectUpTo !== undefined && seq > this.#suspectUpTo) this.#suspectUpTo = undefined;
      },
      (error: unknown) => {
        settleCommitFailure(error);
        if (!isLedgerCommitFailure(error)) return;
        // Before the caller's own handler (it awaits the promise this returned, so reacts after).
        if (this.#visibleFailure) {
          markTookUnsynced(error);
          return this.#failSyncs(error);
        }
        if (this.#syncFailure !== undefined) return;
        this.#suspectUpTo = this.#issued;
        // Every write of a failed batch is rejected: each wait is set on its way by the first only.
        for (const waiter of [...this.#waiting]) {
          if (waiter.settling) continue;
          waiter.settling = true;
          if (waiter.write === undefined) this.#sync(waiter);
          else waiter.write.then(() => this.#sync(waiter), () => waiter.fail(error));
        }
      },
    );
    return write;
  }

  /** Resolves once what is committed is on disk; rejects with UnconfirmedFlushError when that cannot be told. */
  flushed(): Promise<void> {
    return this.#wait(undefined, undefined);
  }

  /**
   * Waits for `flush` (else the current one), the flush of `write` if given: rejects with the
   * write's commit failure, or as `flushed` does.
   */
  #wait(flush: PromiseLike<unknown> | undefined, write: Promise<unknown> | undefined): Promise<void> {
    if (this.#syncFailure !== undefined) return this.#syncFailure.then((failure) => Promise.reject(failure));
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        write,
        settling: false,
        done: () => void (this.#waiting.delete(waiter) && resolve()),
        fail: (error) => void (this.#waiting.delete(waiter) && reject(error)),
      };
      this.#waiting.add(waiter);
      Promise.resolve(flush ?? this.#source.flushed()).then(waiter.done, waiter.fail);
      // A sync before the write has committed would not cover it; a failed write fails the wait
      // through the failure handler in `watch`.
      if (this.#suspectUpTo !== undefined) {
        if (write === undefined) this.#sync(waiter);
        else write.then(() => this.#sync(waiter), () => undefined);
      }
    });
  }

  /** Ends the wait once LMDB has synced what is committed (unconfirmed if a commit's sync has failed meanwhile). */
  #sync(waiter: Waiter): void {
    this.#source.sync((error) => {
      if (this.#syncFailure !== undefined) void this.#syncFailure.then(waiter.fail);
      else if (error === undefined || error === null) waiter.done();
      else waiter.fail(new UnconfirmedFlushError(error));
    });
  }

  /** A commit's own sync failed: every wait ends unconfirmed, now and from now on, and the owner is told. */
  #failSyncs(error: unknown): void {
    if (this.#syncFailure !== undefined) return;
    const cause = commitFailureCause(error);
    this.#syncFailure = cause.then((text) => new UnconfirmedFlushError(text));
    for (const waiter of this.#waiting) {
      waiter.settling = true;
      void this.#syncFailure.then(waiter.fail);
    }
    void cause.then(this.#onSyncFailed);
  }
}

/**
 * How both stores open (lmdb-js `safeRestore`, not in its typings): at the newest commit whose sync
 * finished, never a later one that was only committed. lmdb-js otherwise trusts the newest commit
 * after a restart on the same boot (the page cache outlives a process), and a commit whose sync
 * failed is one: its pages may never reach the disk. (It does not save a disk whose write-back
 * really failed: on an ext4 volume whose backing store filled, the file read back damaged once the
 * page cache was dropped, with or without it.) Nothing is lost by it: a write counts only once its
 * sync finished (durable-write.ts), so a crash drops only commits no one was told of.
 */
export const SYNCED_RESTORE: object = { safeRestore: true };

/** What FlushWatch reads of an lmdb-js root (lmdb-js 3.5 has `sync(callback)` and `env`; its typings do not). */
interface LmdbRoot {
  readonly flushed: PromiseLike<unknown>;
  on(event: 'aftercommit', listener: (commit: { txnId?: number }) => void): unknown;
}

/** The FlushSource of an lmdb-js root. */
export function lmdbFlushSource(root: LmdbRoot): FlushSource {
  const native = root as unknown as { sync(done: (error?: unknown) => void): unknown; readonly env: { info(): { lastTxnId: number } } };
  return {
    flushed: () => root.flushed,
    sync: (done) => void native.sync(done),
    // LMDB's env info (mdb_env_info: the newest meta page's txn id), about 1 µs.
    visibleTxnId: () => native.env.info().lastTxnId,
    // lmdb-js calls `aftercommit` listeners with the commit's id, and without one for a failed commit.
    onCommitEnded: (listener) => void root.on('aftercommit', ({ txnId }) => listener(txnId)),
  };
}

/**
 * Closes an lmdb-js root whose commits may have failed. A flush a failed commit left unsettled must
 * not hold the close; nor may lmdb-js's own close, which waits for the last batch's flush promise,
 * the dead one after a failure (a stop on a full disk never finished, its lock left behind): an
 * empty transaction first starts a batch whose promise settles (it writes no new page, so it
 * commits on a full disk too; if it fails, the close goes on all the same).
 */
export async function closeAfterFailedCommits(root: { transaction(body: () => void): PromiseLike<unknown>; close(): Promise<void> }, flushes: FlushWatch): Promise<void> {
  await flushes.flushed().catch(() => undefined);
  await Promise.resolve(root.transaction(() => undefined)).catch(settleCommitFailure);
  await root.close();
}
