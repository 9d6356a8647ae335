// Work asked for org by org, done for many at once, one pass at a time: the orgs that ask while a
// pass runs go together in the next one. An org's removal reads the tables keyed by time or by hash
// whole (org-removal.ts): a pass reads them once for all its orgs, where a thousand deletions side
// by side read them a thousand times, held a core for two minutes and more, and made other orgs'
// requests wait seconds behind a thousand walks' turns.

interface Waiter<T> {
  resolve(value: T): void;
  reject(reason: unknown): void;
}

export class OrgPasses<T> {
  readonly #work: (orgIds: readonly string[]) => Promise<ReadonlyMap<string, T>>;
  /** The orgs asking for the next pass, each with whoever asked. */
  #waiting = new Map<string, Array<Waiter<T>>>();
  #running = false;

  /** `work` answers per org what its askers get; it rejecting fails every org of its pass. */
  constructor(work: (orgIds: readonly string[]) => Promise<ReadonlyMap<string, T>>) {
    this.#work = work;
  }

  /** Resolves with what the next pass (the one that starts after the running one) answers for the org. */
  run(orgId: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const waiters = this.#waiting.get(orgId) ?? [];
      waiters.push({ resolve, reject });
      this.#waiting.set(orgId, waiters);
      if (!this.#running) void this.#passes();
    });
  }

  async #passes(): Promise<void> {
    this.#running = true;
    while (this.#waiting.size > 0) {
      const pass = this.#waiting;
      this.#waiting = new Map();
      try {
        const answers = await this.#work([...pass.keys()]);
        for (const [orgId, waiters] of pass) {
          for (const waiter of waiters) {
            if (answers.has(orgId)) waiter.resolve(answers.get(orgId)!);
            else waiter.reject(new Error(`the pass gave no answer for organization ${orgId}`));
          }
        }
      } catch (error) {
        for (const waiters of pass.values()) for (const waiter of waiters) waiter.reject(error);
      }
    }
    this.#running = false;
  }
}
