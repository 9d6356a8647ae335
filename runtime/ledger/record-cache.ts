// Decoded records that every request reads and few requests write (an org, its sources, which of
// its workflows an event type triggers), kept in memory so an event does not decode them from the
// ledger again. Entries are grouped by org, and the store that owns the tables is their only writer.
// While a write of an org is in progress (queued, committed, or committed but not yet flushed), reads
// of that org bypass the cache and go to the ledger, so a transaction ordered after the commit sees
// the new records exactly as it would without a cache; once the write settles the org's entries
// are forgotten and reads fill the cache again. Records that can be large (a source's or device's
// schemas, up to ~1 MiB stored, several times that once decoded) are also bounded by their stored
// size: by count alone, 10,000 of them could take the process past its heap.

import { KeyedCounts } from '../../actors/keyed-counts.ts';

/**
 * How much of a cache's room the record under (orgId, key) takes (its stored bytes, read without
 * decoding them), and the room there is. A record above it is never kept, nor frozen (no other
 * reader shares it): freezing a record of ~1 MiB of schemas took as long as decoding it (~30 ms).
 */
export interface RecordWeight {
  weigh(orgId: string, key: string): number;
  readonly max: number;
}

/** Bounded; the org whose entries were cached first goes first. Cached records are frozen, since every reader shares them. */
export class RecordCache<V extends object> {
  readonly #orgs = new Map<string, Map<string, V>>();
  /** The summed weight of each org's entries (only with a RecordWeight). */
  readonly #orgWeights = new KeyedCounts();
  /** Writes in progress per org: while any is, that org's reads go to the ledger. */
  readonly #writing = new KeyedCounts();
  readonly #capacity: number;
  readonly #weight: RecordWeight | undefined;
  #size = 0;
  #weightHeld = 0;

  constructor(capacity = 10_000, weight?: RecordWeight) {
    this.#capacity = capacity;
    this.#weight = weight;
  }

  /** The summed weight of the cached records (0 without a RecordWeight). */
  get weight(): number {
    return this.#weightHeld;
  }

  /** The cached record, else `load()`'s (kept when it exists and no write of the org is in progress). */
  read(orgId: string, key: string, load: () => V | undefined): V | undefined {
    if (this.#writing.get(orgId) > 0) {
      const loaded = load();
      return loaded === undefined || this.#tooHeavy(orgId, key) ? loaded : deepFreeze(loaded);
    }
    const cached = this.#orgs.get(orgId)?.get(key);
    if (cached !== undefined) return cached;
    const loaded = load();
    if (loaded === undefined) return undefined;
    const weight = this.#weight?.weigh(orgId, key) ?? 0;
    const room = this.#weight?.max ?? Number.POSITIVE_INFINITY;
    if (weight > room) return loaded;
    while ((this.#size >= this.#capacity || this.#weightHeld + weight > room) && this.#orgs.size > 0) this.#forget(this.#orgs.keys().next().value as string);
    let entries = this.#orgs.get(orgId);
    if (entries === undefined) this.#orgs.set(orgId, (entries = new Map()));
    entries.set(key, deepFreeze(loaded));
    this.#size += 1;
    if (weight > 0) {
      this.#weightHeld += weight;
      this.#orgWeights.add(orgId, weight);
    }
    return loaded;
  }

  /** Runs `write` (which changes records of `orgId`): forgets the org's entries, and its reads bypass the cache until the write settles, durable or failed. */
  async writing<T>(orgId: string, write: () => Promise<T>): Promise<T> {
    this.#writing.add(orgId);
    this.#forget(orgId);
    try {
      return await write();
    } finally {
      this.#writing.subtract(orgId);
    }
  }

  /** Whether the record under (orgId, key) is above the room: never kept nor frozen. */
  #tooHeavy(orgId: string, key: string): boolean {
    return this.#weight !== undefined && this.#weight.weigh(orgId, key) > this.#weight.max;
  }

  #forget(orgId: string): void {
    this.#size -= this.#orgs.get(orgId)?.size ?? 0;
    this.#orgs.delete(orgId);
    this.#weightHeld -= this.#orgWeights.get(orgId);
    this.#orgWeights.subtract(orgId, this.#orgWeights.get(orgId));
  }
}

/** Plain JSON-like records only: a binary value (which no cached record holds) is left as is. */
function deepFreeze<V extends object>(value: V): V {
  if (ArrayBuffer.isView(value)) return value;
  for (const child of Object.values(value)) if (typeof child === 'object' && child !== null && !Object.isFrozen(child)) deepFreeze(child as object);
  return Object.freeze(value);
}
