// Compiled event-schema validators, one per (org, source, event type), least recently used first
// out (lru-cache). A compiled validator takes about 30 times its schema's size in heap, so the cache
// is bounded by the schemas' total size as well as by count, and a source's new version replaces
// its old validators instead of adding beside them.

import type { ValidateFunction } from 'ajv';
import { LRUCache } from 'lru-cache';

interface Entry {
  /** The source version (`updated_at`) the validator was compiled from. */
  readonly version: string;
  readonly validate: ValidateFunction;
  readonly bytes: number;
}

export class ValidatorCache {
  readonly #entries: LRUCache<string, Entry>;

  /** At most `maxEntries` validators, compiled from at most `maxBytes` of schemas (each schema must be smaller). */
  constructor(maxEntries: number, maxBytes: number) {
    this.#entries = new LRUCache<string, Entry>({ max: maxEntries, maxSize: maxBytes, sizeCalculation: (entry) => Math.max(1, entry.bytes) });
  }

  get size(): number {
    return this.#entries.size;
  }

  get bytes(): number {
    return this.#entries.calculatedSize;
  }

  /** The validator compiled from `version`, or undefined (an older version's counts as absent). */
  get(key: string, version: string): ValidateFunction | undefined {
    const entry = this.#entries.get(key);
    return entry?.version === version ? entry.validate : undefined;
  }

  /** Drops every validator whose key starts with `prefix` (a source that was just written or deleted). */
  forget(prefix: string): void {
    for (const key of [...this.#entries.keys()]) if (key.startsWith(prefix)) this.#entries.delete(key);
  }

  /** Drops every validator (the instance that compiled them is being replaced). */
  clear(): void {
    this.#entries.clear();
  }

  /** Stores the validator compiled from `version` of a `bytes`-long schema, replacing the key's older one. */
  set(key: string, version: string, validate: ValidateFunction, bytes: number): void {
    this.#entries.set(key, { version, validate, bytes });
  }
}
