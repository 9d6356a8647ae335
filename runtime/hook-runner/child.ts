// Supervises the hook-runner as a child process: spawns hook-runner/main.ts, learns its address from
// the `listening on` line, restarts it with backoff when it dies unexpectedly, and stops it on shutdown.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { chooseThreadPoolSize } from '../../hook-runner/thread-pool.ts';
import { LISTENING_PREFIX } from '../../hook-runner/wire.ts';
import { unavailable } from './runner-errors.ts';
import { runnerEnvironment } from './runner-environment.ts';
import { RUNNER_CHILD_OOM_SCORE, volunteerForOomKill } from '../../hook-runner/oom-preference.ts';

/**
 * | state        | meaning                                              | address   |
 * |--------------|------------------------------------------------------|-----------|
 * | idle         | constructed, start() not called                      | none      |
 * | starting     | spawned, waiting for the `listening on` line         | none      |
 * | running      | serving                                              | current   |
 * | restarting   | died unexpectedly; respawn after the backoff delay   | none      |
 * | stopping     | SIGTERM sent by stop(); escalates to SIGKILL         | none      |
 * | stopped      | stop() finished                                      | none      |
 * | failed       | exited with a configuration error (code 2): no retry | none      |
 */
export type HookRunnerChildState = 'idle' | 'starting' | 'running' | 'restarting' | 'stopping' | 'stopped' | 'failed';

export interface HookRunnerChildOptions {
  readonly dataDir: string;
  readonly token: string;
  /** Passed as SLUICE_MASTER_KEY; default: the runner's own 0600 key file. */
  readonly masterKey?: string;
  /** Default `127.0.0.1:0`: a free loopback port, learned from the child's output. */
  readonly listen?: string;
  /** The runtime's `--min-free-disk-mib`, given to the runner (it shares the data dir's disk); default the runner's. */
  readonly minFreeDiskMib?: number;
  /** Base environment of the child (default: this process's), of which it gets only what it reads (runner-environment.ts); token and key are added. */
  readonly env?: NodeJS.ProcessEnv;
  /** How long a start may take before the child is killed and retried (default 30 s; 15 min while rotating its master key: startTimeoutFor). */
  readonly startTimeoutMs?: number;
  /** Delay before the n-th consecutive restart (default 100 ms doubling to 5 s). */
  readonly restartDelayMs?: (restart: number) => number;
  /** The child's stdout/stderr lines and supervisor events. */
  readonly log?: (line: string) => void;
}

const ENTRY = fileURLToPath(new URL('../../hook-runner/main.ts', import.meta.url));
const CONFIG_ERROR_EXIT_CODE = 2;
/** The runner's own stderr lines start so; the one before a config-error exit says what was refused. */
const RUNNER_LINE_PREFIX = 'hook-runner: ';
/** stderr lines kept from the current process, so an unexpected exit can say what it printed last. */
const STDERR_TAIL_LINES = 8;
const STDERR_TAIL_CHARS = 2000;
const STOP_GRACE_MS = 10_000;
/** How long a start may take by default. */
const START_TIMEOUT_MS = 30_000;
/**
 * How long a start may take when the runner is given earlier master keys: it seals every secret
 * they open again before it listens (about 20,000-30,000 a second here), and a start cut off at
 * 30 s left a million secrets part way (it goes on where it stopped, but `sluice dev` gave up).
 * Calls waiting through a later restart still wait START_TIMEOUT_MS at most.
 */
const ROTATING_START_TIMEOUT_MS = 15 * 60_000;

/** The default start timeout for a child whose environment is `env`. */
export const startTimeoutFor = (env: NodeJS.ProcessEnv): number => ((env['SLUICE_PREVIOUS_MASTER_KEYS'] ?? '').trim() === '' ? START_TIMEOUT_MS : ROTATING_START_TIMEOUT_MS);

/** A child that ran this long resets the restart backoff. */
const HEALTHY_AFTER_MS = 30_000;
const defaultRestartDelay = (restart: number): number => Math.min(5000, 100 * 2 ** Math.max(0, restart - 1));

interface Waiter { readonly resolve: (address: string) => void; readonly reject: (error: Error) => void }

export class HookRunnerChild {
  readonly #options: HookRunnerChildOptions;
  readonly #log: (line: string) => void;
  #state: HookRunnerChildState = 'idle';
  #process: ChildProcess | undefined;
  #address: string | undefined;
  #restarts = 0;
  #consecutiveRestarts = 0;
  #startedAt = 0;
  #stderrTail: string[] = [];
  /** How the last child exited unexpectedly, for a wait that times out meanwhile. */
  #lastExit: string | undefined;
  /** A child has listened since start(): Sluice is up, not starting. */
  #hasRun = false;
  #timer: NodeJS.Timeout | undefined;
  #waiters: Waiter[] = [];
  #exited: Promise<void> = Promise.resolve();

  constructor(options: HookRunnerChildOptions) {
    this.#options = options;
    this.#log = options.log ?? ((line) => void process.stderr.write(`${line}\n`));
  }

  get state(): HookRunnerChildState { return this.#state; }
  /** The address while running, else undefined. */
  get currentAddress(): string | undefined { return this.#address; }
  get pid(): number | undefined { return this.#process?.pid; }
  /** Unexpected exits that led to a respawn, over the supervisor's lifetime. */
  get restarts(): number { return this.#restarts; }

  /** Spawns the runner; resolves with its address once it listens. */
  start(): Promise<string> {
    if (this.#state === 'idle') this.#spawn();
    return this.address(this.#startTimeoutMs());
  }

  /**
   * The address of the running child, waiting (at most `timeoutMs`) through a start or restart.
   * Suitable as HookRunnerClient's address source. Rejects with a RetryableError when it times out.
   */
  address(timeoutMs: number = this.#options.startTimeoutMs ?? START_TIMEOUT_MS): Promise<string> {
    if (this.#state === 'running' && this.#address !== undefined) return Promise.resolve(this.#address);
    if (this.#state === 'stopped' || this.#state === 'stopping' || this.#state === 'failed' || this.#state === 'idle') {
      return Promise.reject(unavailable(`The hook-runner child is ${this.#state}.`));
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((waiter) => waiter !== entry);
        // A child that keeps dying says so: "not ready" alone reads as slow.
        const exits = this.#state === 'restarting' || this.#restarts > 0 ? ` (it exited unexpectedly ${this.#restarts} time(s), last with ${this.#lastExit ?? 'unknown'}; see its output in the log)` : '';
        reject(unavailable(`The hook-runner did not become ready within ${timeoutMs} ms${exits}.`));
      }, timeoutMs);
      const entry: Waiter = {
        resolve: (address) => { clearTimeout(timer); resolve(address); },
        reject: (error) => { clearTimeout(timer); reject(error); },
      };
      this.#waiters.push(entry);
    });
  }

  /** SIGTERM, then SIGKILL after a grace period; resolves once the child has exited. Idempotent. */
  async stop(): Promise<void> {
    if (this.#state === 'stopped') return;
    const child = this.#process;
    this.#transition(['idle', 'starting', 'running', 'restarting', 'failed', 'stopping'], 'stopping');
    clearTimeout(this.#timer);
    this.#settleWaiters(unavailable('The hook-runner child was stopped.'));
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const kill = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      child.kill('SIGTERM');
      await this.#exited;
      clearTimeout(kill);
    }
    this.#transition(['stopping'], 'stopped');
  }

  #transition(from: readonly HookRunnerChildState[], to: HookRunnerChildState): boolean {
    if (!from.includes(this.#state)) return false;
    if (this.#state !== to) this.#log(`hook-runner child: ${this.#state} -> ${to}`);
    this.#state = to;
    return true;
  }

  /** A rotation runs before a runner first listens; once one has, a restart finds nothing to seal again and gets the usual time. */
  #startTimeoutMs(): number {
    return this.#options.startTimeoutMs ?? (this.#hasRun ? START_TIMEOUT_MS : startTimeoutFor(this.#options.env ?? process.env));
  }

  #spawn(): void {
    this.#transition(['idle', 'restarting'], 'starting');
    const base = this.#options.env ?? process.env;
    const child = spawn(process.execPath, [
      '--import', import.meta.resolve('tsx'), ENTRY,
      '--listen', this.#options.listen ?? '127.0.0.1:0',
      '--data-dir', this.#options.dataDir,
      ...(this.#options.minFreeDiskMib === undefined ? [] : ['--min-free-disk-mib', String(this.#options.minFreeDiskMib)]),
    ], {
      env: {
        ...runnerEnvironment(base),
        SLUICE_RUNNER_TOKEN: this.#options.token,
        ...(this.#options.masterKey === undefined ? {} : { SLUICE_MASTER_KEY: this.#options.masterKey }),
        // libuv reads this only at process start (see hook-runner/thread-pool.ts).
        UV_THREADPOOL_SIZE: base['UV_THREADPOOL_SIZE'] ?? String(chooseThreadPoolSize()),
      },
      // The IPC channel is never used for messages: its closing tells the runner we are gone.
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      // Own process group: a terminal's Ctrl-C reaches only the runtime, which then stops the
      // runner in order (SIGTERM, drain) instead of racing a restart against its own shutdown.
      detached: true,
    });
    this.#process = child;
    // Killed before the runtime when memory runs out: this supervisor restarts it (oom-preference.ts).
    if (child.pid !== undefined) volunteerForOomKill(RUNNER_CHILD_OOM_SCORE, child.pid);
    this.#startedAt = performance.now();
    this.#stderrTail = [];
    this.#exited = new Promise((done) => {
      child.once('exit', (code, signal) => {
        this.#onExit(child, code, signal);
        done();
      });
      // A process that could not be spawned never emits 'exit'.
      child.once('error', (error) => {
        this.#log(`hook-runner child: ${error.message}`);
        if (child.pid === undefined) {
          this.#onExit(child, null, null);
          done();
        }
      });
    });
    const startTimer = setTimeout(() => {
      if (this.#process === child && this.#state === 'starting') {
        this.#log('hook-runner child: start timed out; killing it');
        child.kill('SIGKILL');
      }
    }, this.#startTimeoutMs());
    child.once('exit', () => clearTimeout(startTimer));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith(LISTENING_PREFIX) && this.#process === child && this.#transition(['starting'], 'running')) {
        this.#hasRun = true;
        clearTimeout(startTimer);
        this.#address = line.slice(LISTENING_PREFIX.length).trim();
        this.#settleWaiters(undefined, this.#address);
      }
      this.#log(line);
    });
    createInterface({ input: child.stderr! }).on('line', (line) => {
      if (this.#process === child && line.trim() !== '') this.#stderrTail = [...this.#stderrTail.slice(1 - STDERR_TAIL_LINES), line];
      this.#log(line);
    });
  }

  #onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#process !== child) return;
    this.#address = undefined;
    if (this.#state === 'stopping') return;
    const lastOutput = this.#stderrTail.join(' | ').slice(-STDERR_TAIL_CHARS);
    this.#lastExit = `${signal ?? `code ${code}`}`;
    this.#log(`hook-runner child: exited unexpectedly (${signal ?? `code ${code}`})${lastOutput === '' ? '' : `; its last output: ${lastOutput}`}`);
    if (code === CONFIG_ERROR_EXIT_CODE) {
      const reason = this.#stderrTail.findLast((line) => line.startsWith(RUNNER_LINE_PREFIX))?.slice(RUNNER_LINE_PREFIX.length);
      // At start-up Sluice then stops; once a runner has run (this one, or one before a restart), Sluice goes on without one, its steps retried.
      this.#transition(['starting', 'running'], 'failed');
      this.#log(`hook-runner child: will not be restarted: it refused its configuration (${reason ?? 'see its output above'}); fix that, then ${this.#hasRun ? 'restart Sluice (custom action steps are retried meanwhile)' : 'start Sluice again'}`);
      this.#settleWaiters(unavailable(`The hook-runner refused its configuration: ${reason ?? 'see its log.'}`));
      return;
    }
    this.#transition(['starting', 'running'], 'restarting');
    if (performance.now() - this.#startedAt > HEALTHY_AFTER_MS) this.#consecutiveRestarts = 0;
    this.#consecutiveRestarts += 1;
    this.#restarts += 1;
    const delay = (this.#options.restartDelayMs ?? defaultRestartDelay)(this.#consecutiveRestarts);
    this.#timer = setTimeout(() => {
      if (this.#state === 'restarting') this.#spawn();
    }, delay);
  }

  #settleWaiters(error: Error | undefined, address?: string): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) {
      if (error !== undefined) waiter.reject(error);
      else if (address !== undefined) waiter.resolve(address);
    }
  }
}

/** The process was told to stop while its hook-runner child was starting. */
export class StartAbortedError extends Error {
  override readonly name = 'StartAbortedError';
  constructor() {
    super('stopped while the hook-runner was starting');
  }
}

/** Creates the supervisor and waits until the first runner listens, or `stopStarting` aborts (the child is stopped, StartAbortedError). */
export async function createHookRunnerChild(options: HookRunnerChildOptions, stopStarting?: AbortSignal): Promise<HookRunnerChild> {
  const child = new HookRunnerChild(options);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new StartAbortedError());
    if (stopStarting?.aborted === true) onAbort();
    else stopStarting?.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  try {
    await Promise.race([child.start(), aborted]);
  } catch (error) {
    await child.stop();
    throw error;
  } finally {
    if (onAbort !== undefined) stopStarting?.removeEventListener('abort', onAbort);
  }
  return child;
}
