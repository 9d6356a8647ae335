// Compiled event-schema validators, one per (org, source, event type), least recently used first
// out. A compiled validator takes about 30 times its schema's size in heap, so the cache is bounded
// by the schemas' total size as well as by count, and a source's new version replaces its old
// validators instead of adding beside them.

import type { ValidateFunction } from 'ajv';

interface Entry {
  /** The source version (`updated_at`) the validator was compiled from. */
  readonly version: string;
  readonly validate: ValidateFunction;
  readonly bytes: number;
}

export class ValidatorCache {
  readonly #entries = new Map<string, Entry>();
  readonly #maxEntries: number;
  readonly #maxBytes: number;
  #bytes = 0;

  constructor(maxEntries: number, maxBytes: number) {
    this.#maxEntries = maxEntries;
    this.#maxBytes = maxBytes;
  }

  get size(): number {
    return this.#entries.size;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** The validator compiled from `version`, or undefined (an older version's counts as absent). */
  get(key: string, version: string): ValidateFunction | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined || entry.version !== version) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.validate;
  }

  /** Stores a validator of `bytes` schema bytes, replacing the key's older one and evicting the least recently used past either bound. */
  set(key: string, version: string, validate: ValidateFunction, bytes: number): void {
    this.#remove(key);
    this.#entries.set(key, { version, validate, bytes });
    this.#bytes += bytes;
    for (const oldest of this.#entries.keys()) {
      if ((this.#entries.size <= this.#maxEntries && this.#bytes <= this.#maxBytes) || oldest === key) break;
      this.#remove(oldest);
    }
  }

  #remove(key: string): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
  }
}
