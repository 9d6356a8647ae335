// The process the hook-runner compiles untrusted modules in (compile-worker.ts), started on the first
// compile and kept for the next ones. Cranelift cannot be stopped part way, and a module within every
// admission cap (scan.rs) can still take it minutes and gigabytes (many locals live across many nested
// blocks), so a compile past its deadline or memory cap is ended by killing the process: the module is
// refused (`code_too_large`) and the next compile starts a fresh one. What comes back is wasmtime's
// compiled code, loaded here without compiling again (sandbox.ts loadArtifact); only this file hands
// artifacts to it, and only those its own child sent over its IPC pipe.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  loadArtifact,
  SandboxCompileError,
  SandboxUnavailableError,
  type CompileRefusalCode,
  type CompiledArtifact,
  type CompiledModule,
  type CompileSource,
} from './sandbox.ts';

/** Wall-clock limit of one compile: ordinary code under the caps compiles in a few seconds (scan.rs). */
export const DEFAULT_COMPILE_TIMEOUT_MS = 20_000;
/**
 * Memory one compile may add to the compile process's resident size (a process that earlier compiles
 * left past half of it is retired after its compile, so none is judged by another's). Measured here: a 1.9 MB rustc -O0 module peaks at
 * ~160 MB (3 s); 30,000 nested blocks with 30,000 locals (220 KB) pass 1 GiB within 4 s.
 */
export const DEFAULT_COMPILE_MAX_MEMORY_BYTES = 1024 ** 3;
/** The least default (and SLUICE_COMPILE_MAX_MEMORY_MIB's least): the measured module above and room to spare. */
export const MIN_COMPILE_MAX_MEMORY_BYTES = 256 * 1024 ** 2;

/**
 * The default cap: a quarter of the memory the process's container (cgroup) allows, from 256 MiB to
 * DEFAULT_COMPILE_MAX_MEMORY_BYTES. With 1 GiB for a whole `sluice dev` the kernel killed a greedy
 * compile at ~900 MB, before it reached 1 GiB, so the module was never refused as too large: each
 * upload answered 503 to try again, and each try cost three such kills.
 */
export function defaultCompileMaxMemoryBytes(containerBytes: number | undefined = process.constrainedMemory?.()): number {
  const quarter = containerBytes !== undefined && Number.isFinite(containerBytes) && containerBytes > 0 ? Math.floor(containerBytes / 4) : DEFAULT_COMPILE_MAX_MEMORY_BYTES;
  return Math.min(DEFAULT_COMPILE_MAX_MEMORY_BYTES, Math.max(MIN_COMPILE_MAX_MEMORY_BYTES, quarter));
}
/** Starting node, tsx and the addon takes well under a second; a child still not ready is stuck. */
const START_TIMEOUT_MS = 30_000;

const WORKER = fileURLToPath(new URL('./compile-worker.ts', import.meta.url));

/** What the runner sends its compile process. */
export interface CompileRequest {
  readonly id: number;
  readonly bytes: Uint8Array;
  /** The bytes were admitted before (sandbox.ts CompileSource). */
  readonly stored: boolean;
}

/** What the compile process sends back. */
export type CompileReply =
  | { readonly kind: 'ready' }
  | { readonly kind: 'compiled'; readonly id: number; readonly code: Uint8Array; readonly hasStart: boolean; readonly retire: boolean }
  | { readonly kind: 'refused'; readonly id: number; readonly code: CompileRefusalCode; readonly reason: string; readonly retire: boolean }
  | { readonly kind: 'failed'; readonly id: number; readonly message: string }
  | { readonly kind: 'memory'; readonly rss: number };

export interface CompileProcessOptions {
  /** Wall-clock limit of one compile, from when the process gets the bytes (default 20 s). */
  readonly timeoutMs?: number;
  /** Memory one compile may add to the compile process's resident size (default: defaultCompileMaxMemoryBytes). */
  readonly maxMemoryBytes?: number;
}

const pickDefined = (values: Record<string, string | undefined>): Record<string, string> =>
  Object.fromEntries(Object.entries(values).filter((entry): entry is [string, string] => entry[1] !== undefined));

interface Pending {
  readonly id: number;
  readonly resolve: (artifact: CompiledArtifact) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

export class CompileProcess {
  readonly #timeoutMs: number;
  readonly #maxMemoryBytes: number;
  #child: ChildProcess | undefined;
  #started: Promise<ChildProcess> | undefined;
  #pending: Pending | undefined;
  #busy = false;
  #nextId = 1;
  #closed = false;

  constructor(options: CompileProcessOptions = {}) {
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_COMPILE_TIMEOUT_MS;
    this.#maxMemoryBytes = options.maxMemoryBytes ?? defaultCompileMaxMemoryBytes();
  }

  /** The compile process's pid while it runs (it starts with the first compile). */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Whether the compile process has a module to compile now. */
  get compiling(): boolean {
    return this.#pending !== undefined;
  }

  /**
   * Admits and compiles `bytes` in the compile process; one compile at a time (the registry's
   * limiter queues them). Rejects with SandboxCompileError when the module is refused, including
   * past the deadline or memory cap, and SandboxUnavailableError when the process failed.
   */
  async compile(bytes: Uint8Array, source: CompileSource = {}): Promise<CompiledModule> {
    if (this.#busy) throw new Error('CompileProcess runs one compile at a time');
    this.#busy = true;
    try {
      return await loadArtifact(await this.#artifactOf(bytes, source.stored === true));
    } finally {
      this.#busy = false;
    }
  }

  /** Kills the compile process; a compile under way is rejected (SandboxUnavailableError). */
  close(): void {
    this.#closed = true;
    this.#fail(new SandboxUnavailableError('the hook-runner is stopping: the compile was not finished'));
    if (this.#child !== undefined) this.#discard(this.#child);
  }

  async #artifactOf(bytes: Uint8Array, stored: boolean): Promise<CompiledArtifact> {
    const stopping = (): SandboxUnavailableError => new SandboxUnavailableError('the hook-runner is stopping: the compile was not started');
    if (this.#closed) throw stopping();
    const starting = (this.#started ??= this.#start());
    const child = await starting.catch((error: unknown) => {
      // No process came of it (spawn threw): the next compile tries a new one.
      if (this.#started === starting && this.#child === undefined) this.#started = undefined;
      throw error;
    });
    if (this.#closed) {
      this.#discard(child);
      throw stopping();
    }
    return new Promise<CompiledArtifact>((resolve, reject) => {
      const id = this.#nextId++;
      const timer = setTimeout(() => {
        this.#fail(new SandboxCompileError('code_too_large', `compiling the module took longer than ${this.#timeoutMs / 1000} s, the sandbox's limit (compile time grows fastest with many locals live across deeply nested blocks and loops, and with long functions): split or simplify the code`, true));
        this.#discard(child);
      }, this.#timeoutMs);
      this.#pending = { id, resolve, reject, timer };
      // Held open only while a compile is under way, so an idle child never keeps the runner alive.
      child.ref();
      child.channel?.ref();
      child.send({ id, bytes, stored } satisfies CompileRequest, (error) => {
        // A process whose exit was seen first has failed this compile already: a later one may be pending on a new process.
        if (error === null || this.#child !== child) return;
        this.#fail(new SandboxUnavailableError(`the compile process could not be sent the module: ${error.message}`, { cause: error }));
        // Gone (EPIPE) before its exit is seen: the next compile starts a fresh process, not another send to this one.
        this.#discard(child);
      });
    });
  }

  #start(): Promise<ChildProcess> {
    return new Promise<ChildProcess>((resolve, reject) => {
      let child: ChildProcess;
      try {
        child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), WORKER, String(this.#maxMemoryBytes)], {
          stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
          // Not the runner's environment: the runner token and master key may be in it.
          env: pickDefined({ PATH: process.env['PATH'], TMPDIR: process.env['TMPDIR'] }),
          // Structured clone: module bytes and artifacts cross as binary, not JSON.
          serialization: 'advanced',
        });
      } catch (error) {
        // Node throws the spawn failures it does not report as 'error' (ENOMEM, EBUSY, …): the
        // sandbox is unavailable for now (a 503 to try again), not the runner failing unexpectedly.
        reject(new SandboxUnavailableError(`the hook-runner's compile process could not be started: ${(error as Error).message}`, { cause: error }));
        return;
      }
      this.#child = child;
      let ready = false;
      const notStarted = (why: string, cause?: Error): void => {
        clearTimeout(startTimer);
        if (!ready) reject(new SandboxUnavailableError(`the hook-runner's compile process did not start: ${why}`, { cause }));
      };
      const startTimer = setTimeout(() => {
        notStarted(`not ready after ${START_TIMEOUT_MS / 1000} s`);
        this.#discard(child);
      }, START_TIMEOUT_MS);
      child.on('message', (reply: CompileReply) => {
        if (reply.kind !== 'ready') {
          this.#onReply(child, reply);
          return;
        }
        ready = true;
        clearTimeout(startTimer);
        resolve(child);
      });
      child.once('error', (error) => {
        notStarted(error.message, error);
        // One that could not be spawned never exits: the next compile tries a new one.
        if (child.pid === undefined) this.#forget(child);
      });
      // 'close', not 'exit': it comes after the channel's last message. The process stopped by its
      // own memory watch sends `memory` and then kills itself, and its exit could be seen first.
      child.once('close', (code, signal) => {
        const how = signal ?? `code ${String(code)}`;
        notStarted(`it exited (${how})`);
        if (this.#child !== child) return;
        this.#forget(child);
        // Not killed here (a kill here forgets the process first): from outside, most often by the
        // kernel when memory ran out, as the compile process volunteers to go first (oom-preference.ts).
        const outside = signal === 'SIGKILL' ? '; killed from outside the runner, most likely by the kernel as memory ran out' : '';
        this.#fail(new SandboxUnavailableError(`the hook-runner's compile process exited during the compile (${how}${outside})`));
      });
      child.unref();
      child.channel?.unref();
    });
  }

  #onReply(child: ChildProcess, reply: Exclude<CompileReply, { kind: 'ready' }>): void {
    if (child !== this.#child) return;
    if (reply.kind === 'memory') {
      const mib = Math.round(this.#maxMemoryBytes / 1024 ** 2);
      this.#fail(new SandboxCompileError('code_too_large', `compiling the module needed more than ${mib} MiB of memory, the sandbox's limit (compile memory grows fastest with many locals live across deeply nested blocks and loops): split or simplify the code`));
      this.#discard(child);
      return;
    }
    if (reply.id !== this.#pending?.id) return;
    // Earlier compiles left it large: the next one starts afresh, judged by its own memory alone.
    if (reply.kind !== 'failed' && reply.retire) this.#discard(child);
    if (reply.kind === 'compiled') this.#take()?.resolve({ code: reply.code, hasStart: reply.hasStart });
    else if (reply.kind === 'refused') this.#fail(new SandboxCompileError(reply.code, reply.reason));
    else this.#fail(new SandboxUnavailableError(reply.message));
  }

  /** Kills `child` and starts the next compile in a fresh process. */
  #discard(child: ChildProcess): void {
    this.#forget(child);
    child.kill('SIGKILL');
  }

  #forget(child: ChildProcess): void {
    if (this.#child !== child) return;
    this.#child = undefined;
    this.#started = undefined;
  }

  #fail(error: Error): void {
    this.#take()?.reject(error);
  }

  /** The compile under way, now ended (its timer cleared, the child no longer held open), if any. */
  #take(): Pending | undefined {
    const pending = this.#pending;
    if (pending === undefined) return undefined;
    this.#pending = undefined;
    clearTimeout(pending.timer);
    this.#child?.unref();
    this.#child?.channel?.unref();
    return pending;
  }
}
