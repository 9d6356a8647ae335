// Compiled guest modules by sha256 digest: bytes are stored durably in LMDB (content-addressed), the
// compiled form is cached in memory (bounded LRU) and lazily recompiled from LMDB after a restart.
import { createHash } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { compileModuleAsync, SandboxCompileError, type CompiledModule } from './sandbox.ts';
import type { ModuleDigest } from './requests.ts';
import { InvalidRequestError, ModuleNotFoundError, RunnerError } from './runner-error.ts';
import type { RunnerStore } from './store.ts';

const MAX_REASON_LENGTH = 2000;

export const digestOf = (bytes: Uint8Array): ModuleDigest =>
  createHash('sha256').update(bytes).digest('hex') as ModuleDigest;

export interface ModuleRegistryOptions {
  /** Compiled modules kept in memory; older ones are recompiled from LMDB on demand. */
  readonly maxCached?: number;
}

export class ModuleRegistry {
  readonly #store: RunnerStore;
  readonly #maxCached: number;
  /** Map iteration order is insertion order: re-inserting on use makes the first key the LRU. */
  readonly #cache = new Map<ModuleDigest, CompiledModule>();
  /** Recompilations from LMDB in progress, so concurrent first invokes after a restart share one. */
  readonly #loading = new Map<ModuleDigest, Promise<CompiledModule>>();

  constructor(store: RunnerStore, options: ModuleRegistryOptions = {}) {
    this.#store = store;
    this.#maxCached = options.maxCached ?? 256;
  }

  /**
   * Validates and compiles `bytes`, then resolves with their digest once the bytes are durable.
   * Compiling an already known module again is cheap and returns the same digest.
   */
  async compile(bytes: Uint8Array): Promise<ModuleDigest> {
    const digest = digestOf(bytes);
    if (!this.#cache.has(digest)) this.#remember(digest, await this.#compileOrReject(bytes));
    if (!this.#store.modules.doesExist(digest)) {
      await this.#store.durable(this.#store.modules.put(digest, Buffer.from(bytes)));
    } else {
      // Committed is visible before it is flushed: a concurrent compile of the same bytes may have
      // written them moments ago. Answer only once what is visible is on disk.
      await this.#store.flushed();
    }
    return digest;
  }

  /** The compiled module for `digest`; rejects with ModuleNotFoundError when it was never compiled here. */
  async get(digest: ModuleDigest): Promise<CompiledModule> {
    const cached = this.#cache.get(digest);
    if (cached !== undefined) {
      this.#remember(digest, cached);
      return cached;
    }
    let loading = this.#loading.get(digest);
    if (loading === undefined) {
      loading = this.#load(digest).finally(() => this.#loading.delete(digest));
      this.#loading.set(digest, loading);
    }
    return loading;
  }

  async #load(digest: ModuleDigest): Promise<CompiledModule> {
    const bytes = this.#store.modules.get(digest);
    if (bytes === undefined) throw new ModuleNotFoundError(digest);
    if (digestOf(bytes) !== digest) {
      throw new RunnerError(status.DATA_LOSS, 'module_corrupt', `The stored bytes of module ${digest} do not match its digest.`);
    }
    let compiled: CompiledModule;
    try {
      compiled = await compileModuleAsync(bytes);
    } catch (error) {
      if (!(error instanceof SandboxCompileError)) throw error;
      throw new RunnerError(status.INTERNAL, 'module_recompile_failed', `Module ${digest} no longer compiles on this runner; compile it again.`, { cause: error });
    }
    this.#remember(digest, compiled);
    return compiled;
  }

  async #compileOrReject(bytes: Uint8Array): Promise<CompiledModule> {
    try {
      return await compileModuleAsync(bytes);
    } catch (error) {
      if (error instanceof SandboxCompileError) {
        throw new InvalidRequestError(error.code, `Invalid module (${error.code}): ${error.reason.slice(0, MAX_REASON_LENGTH)}`, 'wasm');
      }
      throw error;
    }
  }

  #remember(digest: ModuleDigest, compiled: CompiledModule): void {
    this.#cache.delete(digest);
    this.#cache.set(digest, compiled);
    if (this.#cache.size > this.#maxCached) {
      const oldest = this.#cache.keys().next();
      if (oldest.done !== true) this.#cache.delete(oldest.value);
    }
  }
}
