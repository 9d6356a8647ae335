// Waiting for an LMDB environment's flush without hanging on a failed commit. lmdb-js's `flushed`
// is the flush promise of its latest batch, and a batch whose commit fails (a full disk) never
// settles it: only a commit that succeeds calls its resolvers, and lmdb-js goes on handing out that
// promise until the next write starts a batch. A duplicate delivery waiting on it was never
// answered. Here a wait ends with the failure of a commit seen while it waits (a 503 to its
// request), and while the newest write settled is a failed commit, a wait first starts a fresh
// batch with an empty transaction (LMDB commits an empty one even on a full disk).
// (Shared by the runtime's ledger and the hook-runner's store, which imports no runtime code.)

import { isLedgerCommitFailure } from './lmdb-commit-failure.ts';

interface Waiter {
  readonly done: () => void;
  readonly fail: (error: unknown) => void;
}

export class FlushWatch {
  readonly #flushed: () => PromiseLike<unknown>;
  readonly #freshBatch: () => Promise<unknown>;
  readonly #waiting = new Set<Waiter>();
  /** Writes watched so far, numbered in the order they were issued (their batches' order). */
  #issued = 0;
  /** The newest write, by issue, whose outcome is known, and whether it was a failed commit. */
  #settled = 0;
  #lastFailed = false;

  /** `flushed` reads lmdb-js's; `freshBatch` commits an empty transaction (through `watch`). */
  constructor(flushed: () => PromiseLike<unknown>, freshBatch: () => Promise<unknown>) {
    this.#flushed = flushed;
    this.#freshBatch = freshBatch;
  }

  /** Call with every write's promise as it is issued: its outcome tells whether commits are failing. */
  watch<T>(write: T): T {
    if (write instanceof Promise) {
      const seq = ++this.#issued;
      write.then(
        () => this.#settle(seq, undefined),
        (error: unknown) => {
          if (isLedgerCommitFailure(error)) this.#settle(seq, error);
        },
      );
    }
    return write;
  }

  /** Resolves once what is committed is on disk; rejects with a commit failure seen meanwhile. */
  async flushed(): Promise<void> {
    if (this.#lastFailed) await this.#freshBatch();
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        done: () => void (this.#waiting.delete(waiter) && resolve()),
        fail: (error) => void (this.#waiting.delete(waiter) && reject(error)),
      };
      this.#waiting.add(waiter);
      this.#follow(waiter);
    });
  }

  /**
   * A write's outcome. Outcomes settle in JS out of batch order (a transaction's one microtask
   * after a put's), so only the newest write by issue decides whether commits are failing now.
   */
  #settle(seq: number, failure: unknown): void {
    if (failure !== undefined) for (const waiter of [...this.#waiting]) waiter.fail(failure);
    if (seq < this.#settled) return;
    const recovered = this.#lastFailed && failure === undefined;
    this.#settled = seq;
    this.#lastFailed = failure !== undefined;
    // A commit after failed ones: a wait still on a dead flush follows the current one too (it covers
    // every commit before it).
    if (recovered) for (const waiter of [...this.#waiting]) this.#follow(waiter);
  }

  #follow(waiter: Waiter): void {
    Promise.resolve(this.#flushed()).then(waiter.done, waiter.fail);
  }
}
