// Decoded records that every request reads and few requests write (organizations, sources), kept
// in memory so a webhook does not decode them from the ledger twice per request. The store that owns
// the table is its only writer and forgets a key once a write to it is durable: a read during the
// write still sees the committed record (as it would from the ledger), a read after it the new one.

/** Bounded; the oldest entry goes first. Cached records are frozen, since every reader shares them. */
export class RecordCache<V extends object> {
  readonly #entries = new Map<string, V>();
  readonly #capacity: number;

  constructor(capacity = 10_000) {
    this.#capacity = capacity;
  }

  /** The cached record, else `load()`'s (kept when it exists). */
  read(key: string, load: () => V | undefined): V | undefined {
    const cached = this.#entries.get(key);
    if (cached !== undefined) return cached;
    const loaded = load();
    if (loaded === undefined) return undefined;
    if (this.#entries.size >= this.#capacity) this.#entries.delete(this.#entries.keys().next().value as string);
    this.#entries.set(key, deepFreeze(loaded));
    return loaded;
  }

  /** Runs `write` and forgets `key` once it settled (durable or failed). */
  async writing<T>(key: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } finally {
      this.#entries.delete(key);
    }
  }
}

function deepFreeze<V extends object>(value: V): V {
  for (const child of Object.values(value)) if (typeof child === 'object' && child !== null && !Object.isFrozen(child)) deepFreeze(child as object);
  return Object.freeze(value);
}
