// One promise chain per run: the run engine applies a run's transitions one at a time, each after
// the previous one is durable, while different runs proceed side by side.

export class RunChains {
  readonly #chains = new Map<string, Promise<void>>();
  readonly #onFailure: (runKey: string, error: unknown) => void;
  #closed = false;

  /** `onFailure` hears of every task that failed; the run's chain goes on with its next task. */
  constructor(onFailure: (runKey: string, error: unknown) => void) {
    this.#onFailure = onFailure;
  }

  /**
   * Runs `task` once the run's earlier tasks are done (never after `close`: then it resolves
   * undefined). The returned promise has the task's result, or rejects with its failure, which
   * the chain has already reported.
   */
  serially<T>(runKey: string, task: () => Promise<T> | T): Promise<T | undefined> {
    const previous = this.#chains.get(runKey) ?? Promise.resolve();
    const outcome = previous.then(() => (this.#closed ? undefined : task()));
    const next = outcome.then(
      () => undefined,
      (error: unknown) => this.#onFailure(runKey, error),
    );
    this.#chains.set(runKey, next);
    void next.then(() => {
      if (this.#chains.get(runKey) === next) this.#chains.delete(runKey);
    });
    return outcome;
  }

  /** Starts no further task and resolves once the ones in progress are done. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#chains.values()]);
  }
}
