// Waiting for an LMDB environment's flush without hanging on a failed commit. lmdb-js hands out
// the flush promise of its latest batch (as `root.flushed`, and as a write's own `flushed`), and a
// batch whose commit fails (a full disk) never settles it: only a commit that succeeds calls its
// resolvers, a batch's promise may be shared by writes that committed before the failure, and
// lmdb-js goes on handing the dead promise out until a write starts a new batch. A duplicate
// delivery or a committed API key waiting on one was never answered. Here a wait ends with the
// failure of a commit seen while it waits (a 503 to its request); and from a failed commit until a
// write issued after it has committed (a new batch, a live promise), a wait also asks LMDB to sync
// the environment, and ends when that sync has put everything committed on disk.
// (Shared by the runtime's ledger and the hook-runner's store, which imports no runtime code.)

import { isLedgerCommitFailure, settleCommitFailure } from './lmdb-commit-failure.ts';

interface Waiter {
  readonly done: () => void;
  readonly fail: (error: unknown) => void;
}

export interface FlushSource {
  /** lmdb-js's `root.flushed`. */
  readonly flushed: () => PromiseLike<unknown>;
  /** lmdb-js's `root.sync(callback)`: fsyncs what is committed, then calls back (with an error if it failed). */
  readonly sync: (done: (error?: unknown) => void) => void;
}

export class FlushWatch {
  readonly #source: FlushSource;
  readonly #waiting = new Set<Waiter>();
  readonly #watched = new WeakSet<Promise<unknown>>();
  /** Writes watched so far, numbered as they are issued. */
  #issued = 0;
  /** While set, the flush promises on offer may be dead: writes issued up to this number may share one. */
  #suspectUpTo: number | undefined;

  constructor(source: FlushSource) {
    this.#source = source;
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
    if (own !== undefined) Object.defineProperty(write, 'flushed', { configurable: true, get: () => this.wait(own) });
    write.then(
      () => {
        // Issued after the failure was seen: its batch is a new one, with a live flush promise.
        if (this.#suspectUpTo !== undefined && seq > this.#suspectUpTo) this.#suspectUpTo = undefined;
      },
      (error: unknown) => {
        settleCommitFailure(error);
        if (!isLedgerCommitFailure(error)) return;
        this.#suspectUpTo = this.#issued;
        for (const waiter of [...this.#waiting]) waiter.fail(error);
      },
    );
    return write;
  }

  /** Resolves once what is committed is on disk; rejects with a commit failure seen meanwhile. */
  flushed(): Promise<void> {
    return this.wait(undefined);
  }

  /** Waits for `flush` (else the current one) as `flushed` does. */
  wait(flush: PromiseLike<unknown> | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        done: () => void (this.#waiting.delete(waiter) && resolve()),
        fail: (error) => void (this.#waiting.delete(waiter) && reject(error)),
      };
      this.#waiting.add(waiter);
      Promise.resolve(flush ?? this.#source.flushed()).then(waiter.done, waiter.fail);
      if (this.#suspectUpTo !== undefined) this.#source.sync((error) => (error === undefined || error === null ? waiter.done() : waiter.fail(error)));
    });
  }
}

/** The FlushSource of an lmdb-js root (lmdb-js 3.5 has `sync(callback)`; its typings do not). */
export function lmdbFlushSource(root: { readonly flushed: PromiseLike<unknown> }): FlushSource {
  const syncable = root as unknown as { sync(done: (error?: unknown) => void): unknown };
  return { flushed: () => root.flushed, sync: (done) => void syncable.sync(done) };
}
