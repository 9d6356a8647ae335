// Tasks that share a key run one after another, in the order they came; other keys run freely.
// Updates of one workflow read it, merge the request into it and write a new version: run at once,
// all but one of them would find the version they read already replaced.

export class KeyedSerial {
  /** Per key, the settling of its last task (never rejects), while one is queued or running. */
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `task` once every earlier task of `key` has settled; answers its result. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const result = (this.#tails.get(key) ?? Promise.resolve()).then(task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}
