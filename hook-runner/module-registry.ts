// Compiled guest modules by sha256 digest: bytes are stored durably in LMDB (content-addressed, with
// the orgs that uploaded or called them, so a module goes when its last user is forgotten), the
// compiled form is cached in memory (compiled-cache.ts: bounded, orgs past half of it giving up their
// own first) and lazily recompiled from LMDB after a restart. Compiles run
// one at a time, in the compile process (compile-process.ts), which is killed at a deadline; loading
// what it compiled takes the libuv thread set aside for compiles (thread-pool.ts). One of the same bytes
// already under way is joined, not started again. A recompile that an Invoke waits for goes before
// queued uploads, so one tenant's uploads (each can take seconds) cannot stall other tenants' runs;
// at most a few go ahead in a row (thread-pool.ts), so a stream of recompiles cannot stall uploads
// either. An upload every caller of which gave up (its deadline passed) is dropped before it starts.
import { createHash } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { CompiledCache, type CompiledCacheBounds } from './compiled-cache.ts';
import { CompileProcess, type CompileProcessOptions } from './compile-process.ts';
import { SandboxCompileError, type CompiledModule } from './sandbox.ts';
import type { ModuleDigest } from './requests.ts';
import { CompileAbandonedError, InvalidRequestError, InvokeAbandonedError, ModuleNotFoundError, OrganizationForgottenError, RunnerError } from './runner-error.ts';
import type { ModuleUserKey, RunnerStore } from './store.ts';
import { COMPILE_THREADS, createRunLimiter } from './thread-pool.ts';

const MAX_REASON_LENGTH = 2000;

export const digestOf = (bytes: Uint8Array): ModuleDigest =>
  createHash('sha256').update(bytes).digest('hex') as ModuleDigest;

/** The bounds of the compiled cache (compiled-cache.ts: older modules are recompiled from LMDB on demand). */
export interface ModuleRegistryOptions extends CompiledCacheBounds {
  /** The compile process's deadline and memory cap per compile. */
  readonly compile?: CompileProcessOptions | undefined;
  /** Whether the org was forgotten (forgotten-orgs.ts): its uploads are refused, none stored. */
  readonly forgotten?: ((orgId: string) => boolean) | undefined;
}

/** Says whether the caller of a compile has gone (its call cancelled or past its deadline). */
export type GaveUp = () => boolean;

/** An upload compile under way or queued, with a check per caller of whether it gave up. */
interface Compiling {
  readonly compiled: Promise<CompiledModule>;
  readonly gaveUp: GaveUp[];
}

/** Whose turn a compile waits in (tenant-queue.ts), and whether it goes before uploads (a run waits on it). */
export interface CompileTurn {
  readonly tenant?: string;
  readonly first?: boolean;
}

export class ModuleRegistry {
  readonly #store: RunnerStore;
  readonly #cache: CompiledCache;
  /** Recompilations from LMDB in progress, so concurrent first invokes after a restart share one. */
  readonly #loading = new Map<ModuleDigest, Compiling>();
  /** Compiles of uploaded bytes in progress, so the same upload sent again waits for the first. */
  readonly #compiling = new Map<ModuleDigest, Compiling>();
  /**
   * Compiles of bytes the runtime sends back (restores) in progress: apart from uploads', since a
   * restore leaves out names an upload is refused for, and one joining the other took its answer.
   */
  readonly #restoring = new Map<ModuleDigest, Compiling>();
  /** A compile holds a thread for up to seconds: they queue here instead of taking every thread. */
  readonly #compiles = createRunLimiter(COMPILE_THREADS);
  readonly #compiler: CompileProcess;
  readonly #forgotten: (orgId: string) => boolean;

  constructor(store: RunnerStore, options: ModuleRegistryOptions = {}) {
    this.#store = store;
    this.#forgotten = options.forgotten ?? (() => false);
    this.#compiler = new CompileProcess(options.compile);
    this.#cache = new CompiledCache(options);
  }

  /**
   * Validates and compiles `bytes`, then resolves with their digest once the bytes are durable.
   * Compiling an already known module again is cheap and returns the same digest. `assertWritable`
   * runs again just before the bytes are written (it throws when the disk is below its floor): a
   * compile waits its turn for up to seconds, and a queue of uploads let in while there was room
   * wrote tens of MiB after the floor was crossed, until LMDB met the full disk.
   */
  async compile(bytes: Uint8Array, gaveUp: GaveUp = () => false, turn: CompileTurn = {}, assertWritable: () => void = () => undefined): Promise<ModuleDigest> {
    const digest = digestOf(bytes);
    const restore = turn.first === true;
    // An upload is checked under its own rules even when the same bytes were compiled as a restore
    // or a recompile (names past their caps left out): those would let it through unchecked.
    const tenant = turn.tenant ?? '';
    let compiled: CompiledModule | undefined;
    if (restore ? !this.#cache.has(digest) : !this.#cache.hasAsUpload(digest)) {
      compiled = await this.#joinOrStart(restore ? this.#restoring : this.#compiling, digest, gaveUp, (callers) =>
        this.#compileUnlessAbandoned(callers, () => new CompileAbandonedError(), () => this.#compileOrReject(bytes, restore), restore, tenant),
      );
    }
    // Cached only once its bytes are kept: one refused (the disk below its floor, the org forgotten
    // while it waited its turn) must not be served from memory while the store lacks it.
    await this.#keep(digest, bytes, tenant, assertWritable);
    if (compiled !== undefined) this.#cache.set(digest, compiled, bytes.length, tenant, !restore);
    return digest;
  }

  /**
   * Records `orgId` as a user of a stored module it calls, once per org and module: bytes restored
   * for one org serve every org whose versions have them, and each must keep them when another is
   * forgotten (forgotten-orgs.ts). Not written while `writable` says no (the disk below its floor):
   * a call that writes nothing else (a simulation) still runs, and a later call records the use.
   */
  async noteUse(digest: ModuleDigest, orgId: string, writable: () => boolean = () => true): Promise<void> {
    const store = this.#store;
    const user: ModuleUserKey = [digest, orgId];
    if (store.moduleUsers.doesExist(user) || !writable()) return;
    await store.durable(
      store.modules.transaction(() => {
        // Bytes removed meanwhile (the call then fails as not found, or runs once from memory): no use of them to keep.
        if (this.#forgotten(orgId) || !store.modules.doesExist(digest)) return;
        store.moduleUsers.putSync(user, null);
      }),
    );
  }

  /**
   * Stores the bytes unless they are there intact, and `tenant` as a user of them (store.ts
   * moduleUsers), in one write. Inside that write, the bytes are looked for again: forgetting an org
   * removes a module with its last user (forgotten-orgs.ts), in a write of its own that lands
   * wholly before or after this one.
   */
  async #keep(digest: ModuleDigest, bytes: Uint8Array, tenant: string, assertWritable: () => void): Promise<void> {
    const store = this.#store;
    // Missing, or damaged (its bytes no longer hash to the digest: #load refuses them as
    // module_corrupt): these bytes replace them, so the runtime sending them again repairs it.
    const replace = !this.#holdsIntact(digest);
    const user: ModuleUserKey = [digest, tenant];
    if (!replace && store.moduleUsers.doesExist(user)) {
      // Committed is visible before it is flushed: a concurrent compile of the same bytes may have
      // written them moments ago. Answer only once what is visible is on disk.
      await store.flushed();
      return;
    }
    assertWritable();
    const kept = await store.durable(
      store.modules.transaction(() => {
        if (this.#forgotten(tenant)) return false;
        if (replace || !store.modules.doesExist(digest)) store.modules.putSync(digest, Buffer.from(bytes));
        store.moduleUsers.putSync(user, null);
        return true;
      }),
    );
    if (!kept) throw new OrganizationForgottenError();
  }

  /** Lets the compiled form of `digest` go (its bytes were removed: forgotten-orgs.ts). */
  dropCompiled(digest: string): void {
    this.#cache.delete(digest as ModuleDigest);
  }

  /** Ends the compile process; a compile under way fails as the sandbox being unavailable. */
  close(): void {
    this.#compiler.close();
  }

  /** Whether the bytes stored for `digest` are there and hash to it (read and hashed: compiles are rare). */
  #holdsIntact(digest: ModuleDigest): boolean {
    const stored = this.#store.modules.get(digest);
    return stored !== undefined && digestOf(stored) === digest;
  }

  /** Compiles running (at most COMPILE_THREADS) and waiting for a thread. */
  get compiles(): { readonly active: number; readonly queued: number } {
    return { active: this.#compiles.active, queued: this.#compiles.queued };
  }

  /** How many compiled modules are cached, and their modules' total size. */
  get cached(): { readonly count: number; readonly bytes: number } {
    return this.#cache.held;
  }

  /** What one org's compiles hold of the cache. */
  cachedFor(tenant: string): { readonly count: number; readonly bytes: number } {
    return this.#cache.heldBy(tenant);
  }

  /** Throws ModuleNotFoundError when `digest` was never compiled here (its bytes are not stored); compiles nothing. */
  assertStored(digest: ModuleDigest): void {
    if (!this.#cache.has(digest) && !this.#store.modules.doesExist(digest)) throw new ModuleNotFoundError(digest);
  }

  /**
   * The compiled module for `digest`, compiled again from LMDB (in `tenant`'s turn, before uploads)
   * when it is not cached; rejects with ModuleNotFoundError when it was never compiled here, and
   * with InvokeAbandonedError when every caller waiting for it gave up before its turn came.
   */
  async get(digest: ModuleDigest, tenant = '', gaveUp: GaveUp = () => false): Promise<CompiledModule> {
    const cached = this.#cache.get(digest);
    if (cached !== undefined) return cached;
    return this.#joinOrStart(this.#loading, digest, gaveUp, (callers) => this.#load(digest, tenant, callers));
  }

  /**
   * The compile of `digest` under way in `underWay`, joined by one more caller (`gaveUp`), or one
   * `start`ed now for that caller: `start` gets the list of callers, which later joiners extend,
   * and the entry leaves `underWay` once the compile has settled.
   */
  #joinOrStart(underWay: Map<ModuleDigest, Compiling>, digest: ModuleDigest, gaveUp: GaveUp, start: (callers: readonly GaveUp[]) => Promise<CompiledModule>): Promise<CompiledModule> {
    const joined = underWay.get(digest);
    if (joined !== undefined) {
      joined.gaveUp.push(gaveUp);
      return joined.compiled;
    }
    // Filled before the compile can start (with a free thread it starts at once).
    const callers: GaveUp[] = [gaveUp];
    const compiled = start(callers).finally(() => underWay.delete(digest));
    underWay.set(digest, { compiled, gaveUp: callers });
    return compiled;
  }

  /** Runs `compile` in its turn for the compile thread, or rejects with `abandoned()` when every caller gave up before that turn came. */
  #compileUnlessAbandoned(callers: readonly GaveUp[], abandoned: () => Error, compile: () => Promise<CompiledModule>, first: boolean, tenant: string): Promise<CompiledModule> {
    return this.#compiles.run(() => (callers.every((gone) => gone()) ? Promise.reject(abandoned()) : compile()), first, tenant);
  }

  async #load(digest: ModuleDigest, tenant: string, callers: readonly GaveUp[]): Promise<CompiledModule> {
    const bytes = this.#store.modules.get(digest);
    if (bytes === undefined) throw new ModuleNotFoundError(digest);
    if (digestOf(bytes) !== digest) {
      throw new RunnerError(status.DATA_LOSS, 'module_corrupt', `The stored bytes of module ${digest} do not match its digest.`);
    }
    let compiled: CompiledModule;
    try {
      // Seconds of the one compile thread: not spent for Invokes whose callers have all gone.
      // Admitted when uploaded: names past the caps added since are left out, not refused (sandbox.ts CompileSource).
      compiled = await this.#compileUnlessAbandoned(callers, () => new InvokeAbandonedError(), () => this.#compiler.compile(bytes, { stored: true }), true, tenant);
    } catch (error) {
      if (!(error instanceof SandboxCompileError)) throw error;
      // It compiled within the deadline when it was uploaded: a busy machine, not the module, is the likely cause. Retried.
      if (error.timedOut) throw recompileTimeout(digest, error);
      throw new RunnerError(status.INTERNAL, 'module_recompile_failed', `Module ${digest} no longer compiles on this runner (${error.reason}); upload a rebuilt module as a new version.`, { cause: error });
    }
    this.#cache.set(digest, compiled, bytes.length, tenant);
    return compiled;
  }

  /**
   * `restore`: the runtime sends back a module it approved before, which compiled in time then (and
   * may have names past the caps added since: they are left out, not refused; sandbox.ts CompileSource).
   */
  async #compileOrReject(bytes: Uint8Array, restore: boolean): Promise<CompiledModule> {
    try {
      return await this.#compiler.compile(bytes, { stored: restore });
    } catch (error) {
      if (error instanceof SandboxCompileError && error.timedOut && restore) throw recompileTimeout(digestOf(bytes), error);
      if (error instanceof SandboxCompileError) {
        throw new InvalidRequestError(error.code, `Invalid module (${error.code}): ${error.reason.slice(0, MAX_REASON_LENGTH)}`, 'wasm');
      }
      throw error;
    }
  }
}

/**
 * A module that compiled within the deadline when it was uploaded ran past it compiling again (after
 * a restart or an eviction, or sent back by the runtime): a busy machine, not the module, is the
 * likely cause, so it is retryable (UNAVAILABLE), not `module_recompile_failed`.
 */
function recompileTimeout(digest: ModuleDigest, error: SandboxCompileError): RunnerError {
  return new RunnerError(status.UNAVAILABLE, 'module_recompile_timeout', `Module ${digest} took longer than the compile deadline to compile again on this runner (${error.reason}); it compiled in time when uploaded, so the call is retried.`, { cause: error });
}
