// Decoded records that every request reads and few requests write (an org, its sources, which of
// its workflows an event type triggers), kept in memory so an event does not decode them from the
// ledger again. Entries are grouped by org. The store that owns the tables is their only writer and
// forgets the org's entries once a write settles: a read during the write still sees the committed
// records (as it would from the ledger), a read after it the new ones.

/** Bounded; the org whose entries were cached first goes first. Cached records are frozen, since every reader shares them. */
export class RecordCache<V extends object> {
  readonly #orgs = new Map<string, Map<string, V>>();
  readonly #capacity: number;
  #size = 0;

  constructor(capacity = 10_000) {
    this.#capacity = capacity;
  }

  /** The cached record, else `load()`'s (kept when it exists). */
  read(orgId: string, key: string, load: () => V | undefined): V | undefined {
    const cached = this.#orgs.get(orgId)?.get(key);
    if (cached !== undefined) return cached;
    const loaded = load();
    if (loaded === undefined) return undefined;
    while (this.#size >= this.#capacity && this.#orgs.size > 0) this.#forget(this.#orgs.keys().next().value as string);
    let entries = this.#orgs.get(orgId);
    if (entries === undefined) this.#orgs.set(orgId, (entries = new Map()));
    entries.set(key, deepFreeze(loaded));
    this.#size += 1;
    return loaded;
  }

  /** Runs `write` (which changes records of `orgId`) and forgets that org's entries once it settled, durable or failed. */
  async writing<T>(orgId: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } finally {
      this.#forget(orgId);
    }
  }

  #forget(orgId: string): void {
    this.#size -= this.#orgs.get(orgId)?.size ?? 0;
    this.#orgs.delete(orgId);
  }
}

function deepFreeze<V extends object>(value: V): V {
  for (const child of Object.values(value)) if (typeof child === 'object' && child !== null && !Object.isFrozen(child)) deepFreeze(child as object);
  return Object.freeze(value);
}
