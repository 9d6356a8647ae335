// The runner's cache of compiled modules (module-registry.ts): least recently used first out,
// bounded by count and by module bytes (compiled code takes some 20 times a module's size). One
// cache serves every org, so an org cycling through many large modules would push every other org's
// modules out, each then compiled again on its next call; so whenever room must be made, an org
// holding more than half of either bound gives up its own least recently used modules first.
import { LRUCache } from 'lru-cache';
import type { CompiledModule } from './sandbox.ts';
import type { ModuleDigest } from './requests.ts';

export interface CompiledCacheBounds {
  /** Compiled modules kept (default 256). */
  readonly maxCached?: number | undefined;
  /** Total size of the modules whose compiled form is kept (default 32 MiB). */
  readonly maxCachedBytes?: number | undefined;
}

interface Entry {
  readonly compiled: CompiledModule;
  readonly bytes: number;
  /** The org whose upload or call compiled it (an org sending the same bytes shares it). */
  readonly tenant: string;
  /**
   * Compiled under an upload's rules (a name past its cap refused), not as stored bytes sent back or
   * compiled again (such names left out): an upload of the same bytes is then answered from here.
   */
  readonly asUpload: boolean;
}

interface Held {
  count: number;
  bytes: number;
}

export class CompiledCache {
  readonly #maxCount: number;
  readonly #maxBytes: number;
  readonly #cache: LRUCache<ModuleDigest, Entry>;
  readonly #held = new Map<string, Held>();

  constructor(bounds: CompiledCacheBounds = {}) {
    this.#maxCount = bounds.maxCached ?? 256;
    this.#maxBytes = bounds.maxCachedBytes ?? 32 * 1024 * 1024;
    // Modules are at most 8 MiB (the upload cap), well inside the byte bound.
    this.#cache = new LRUCache<ModuleDigest, Entry>({
      max: this.#maxCount,
      maxSize: this.#maxBytes,
      sizeCalculation: (entry) => entry.bytes,
      dispose: (entry) => this.#count(entry, -1),
    });
  }

  get(digest: ModuleDigest): CompiledModule | undefined {
    return this.#cache.get(digest)?.compiled;
  }

  has(digest: ModuleDigest): boolean {
    return this.#cache.has(digest);
  }

  /** Whether the module is kept as compiled under an upload's rules (Entry.asUpload). */
  hasAsUpload(digest: ModuleDigest): boolean {
    return this.#cache.peek(digest)?.asUpload === true;
  }

  /** Keeps `compiled` (`bytes`: its module's size), for `tenant`, making room as the header says; `asUpload`: see Entry. */
  set(digest: ModuleDigest, compiled: CompiledModule, bytes: number, tenant: string, asUpload = false): void {
    const entry = { compiled, bytes: Math.max(1, bytes), tenant, asUpload };
    this.#cache.delete(digest);
    this.#makeRoomWithin(tenant, entry.bytes);
    this.#cache.set(digest, entry);
    if (this.#cache.has(digest)) this.#count(entry, 1);
  }

  /** Lets the compiled form of `digest` go. */
  delete(digest: ModuleDigest): void {
    this.#cache.delete(digest);
  }

  /** How many compiled modules are kept, and their modules' total size. */
  get held(): { readonly count: number; readonly bytes: number } {
    return { count: this.#cache.size, bytes: this.#cache.calculatedSize };
  }

  /** What `tenant`'s compiles hold of the cache. */
  heldBy(tenant: string): { readonly count: number; readonly bytes: number } {
    const held = this.#held.get(tenant);
    return { count: held?.count ?? 0, bytes: held?.bytes ?? 0 };
  }

  /**
   * While adding `bytes` for `tenant` would push a module out, and an org (`tenant` counted with the
   * new module) holds more than half of a bound, that org's least recently used module goes; then
   * plain LRU makes whatever room is left to make.
   */
  #makeRoomWithin(tenant: string, bytes: number): void {
    const full = (): boolean => this.#cache.size + 1 > this.#maxCount || this.#cache.calculatedSize + bytes > this.#maxBytes;
    while (full()) {
      const hog = this.#overHalf(tenant, bytes);
      const oldest = hog === undefined ? undefined : this.#oldestOf(hog);
      if (oldest === undefined) return;
      this.#cache.delete(oldest);
    }
  }

  /** `tenant`'s least recently used module (read only: the cache is not changed while it is walked). */
  #oldestOf(tenant: string): ModuleDigest | undefined {
    for (const digest of this.#cache.rkeys()) if (this.#cache.peek(digest)?.tenant === tenant) return digest;
    return undefined;
  }

  /** An org holding more than half of either bound, counting `bytes` more for `tenant`. */
  #overHalf(tenant: string, bytes: number): string | undefined {
    const over = (count: number, held: number): boolean => count > this.#maxCount / 2 || held > this.#maxBytes / 2;
    const own = this.heldBy(tenant);
    if (over(own.count + 1, own.bytes + bytes)) return tenant;
    for (const [other, held] of this.#held) if (over(held.count, held.bytes)) return other;
    return undefined;
  }

  #count(entry: Entry, sign: 1 | -1): void {
    const held = this.#held.get(entry.tenant) ?? { count: 0, bytes: 0 };
    held.count += sign;
    held.bytes += sign * entry.bytes;
    if (held.count === 0) this.#held.delete(entry.tenant);
    else this.#held.set(entry.tenant, held);
  }
}
