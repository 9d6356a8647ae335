// Waiting for the ledger's flush without hanging on a failed commit. lmdb-js's `flushed` is the
// flush promise of its latest batch, and a batch whose commit fails (a full disk) never settles it:
// only a commit that succeeds calls its resolvers, and lmdb-js goes on handing out that promise
// until the next write starts a batch. A duplicate delivery waiting on it was never answered, and
// a shutdown waiting on it never ended. Here a wait ends with the failure of a commit seen while it
// waits (a 503 write_failed to its request), and after a failed commit a wait first starts a fresh
// batch with an empty transaction.

import { isLedgerCommitFailure } from '../../hook-runner/lmdb-commit-failure.ts';

export class FlushWatch {
  readonly #flushed: () => PromiseLike<unknown>;
  readonly #freshBatch: () => Promise<unknown>;
  /** Rejecters of the waits in progress. */
  readonly #waiting = new Set<(error: unknown) => void>();
  /** The last write settled was a failed commit: the flush promise on offer may be its dead one. */
  #lastFailed = false;

  /** `flushed` reads lmdb-js's; `freshBatch` commits an empty transaction (through `watch`). */
  constructor(flushed: () => PromiseLike<unknown>, freshBatch: () => Promise<unknown>) {
    this.#flushed = flushed;
    this.#freshBatch = freshBatch;
  }

  /** Call with every write's promise: its outcome tells whether commits are failing. */
  watch<T>(write: T): T {
    if (write instanceof Promise) {
      write.then(
        () => void (this.#lastFailed = false),
        (error: unknown) => {
          if (!isLedgerCommitFailure(error)) return;
          this.#lastFailed = true;
          for (const fail of [...this.#waiting]) fail(error);
        },
      );
    }
    return write;
  }

  /** Resolves once what is committed is on disk; rejects with a commit failure seen meanwhile. */
  async flushed(): Promise<void> {
    if (this.#lastFailed) await this.#freshBatch();
    await new Promise<void>((resolve, reject) => {
      const fail = (error: unknown): void => {
        this.#waiting.delete(fail);
        reject(error);
      };
      this.#waiting.add(fail);
      Promise.resolve(this.#flushed()).then(() => {
        this.#waiting.delete(fail);
        resolve();
      }, fail);
    });
  }
}
