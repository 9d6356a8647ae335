// Tasks that share a key run one after another, in the order they came; other keys run freely.
// Updates of one workflow read it, merge the request into it and write a new version: run at once,
// all but one of them would find the version they read already replaced. Replays of one event
// queue the same way, so a second click sees the replay the first one made; so do the creates of
// one inbox name, and the writes of one custom action secret.

export class KeyedSerial {
  /** Per key, the settling of its last task (never rejects), while one is queued or running. */
  readonly #tails = new Map<string, Promise<void>>();
  /** Per key, how many tasks are queued or running. */
  readonly #counts = new Map<string, number>();

  /** How many tasks of `key` are queued or running (0 when none). */
  queued(key: string): number {
    return this.#counts.get(key) ?? 0;
  }

  /** Runs `task` once every earlier task of `key` has settled; answers its result. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    this.#counts.set(key, this.queued(key) + 1);
    const result = (this.#tails.get(key) ?? Promise.resolve()).then(task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      const left = this.queued(key) - 1;
      if (left === 0) this.#counts.delete(key);
      else this.#counts.set(key, left);
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}
