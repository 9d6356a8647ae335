// Owns every child process the bench starts: servers that announce their port, and one-shot
// workers that print a JSON result. Each child leads its own process group; all are stopped at the end.

import { spawn, type ChildProcess } from 'node:child_process';

/** A server child that printed `listening on http://127.0.0.1:<port>`. */
export interface ServerChild {
  readonly name: string;
  readonly port: number;
  readonly baseUrl: string;
  /** The child's pid, which also names its process group. */
  readonly pid: number;
  /** Last lines the child wrote to stderr, for error messages. */
  stderrTail(): string;
  /** SIGTERM to the child's process group, SIGKILL if it is still there after `graceMs`. */
  stop(): Promise<void>;
  /** SIGKILL to the child's process group at once (a crash); resolves once the child has exited. */
  kill(): Promise<void>;
}

export interface ChildSpec {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env?: Readonly<Record<string, string>>;
  /** Bound on start-up (servers) or on the whole run (workers). */
  readonly timeoutMs: number;
}

const LISTENING = /listening on http:\/\/127\.0\.0\.1:(\d+)/;
const TAIL_BYTES = 4096;
const GRACE_MS = 5000;

export class ChildProcesses {
  readonly #live = new Set<ChildProcess>();

  /** Starts a server and resolves once it announced its port; rejects (and kills it) otherwise. */
  startServer(spec: ChildSpec): Promise<ServerChild> {
    const child = this.#spawn(spec);
    const tail = captureTail(child);
    return new Promise<ServerChild>((resolve, reject) => {
      let stdout = '';
      const fail = (why: string): void => {
        clearTimeout(timer);
        void this.#stop(child).then(() => reject(new Error(`${spec.name}: ${why}\n${tail()}`)));
      };
      const timer = setTimeout(() => fail(`no "listening on" line within ${spec.timeoutMs} ms`), spec.timeoutMs);
      const onData = (chunk: Buffer): void => {
        stdout += chunk.toString('utf8');
        const match = LISTENING.exec(stdout);
        if (match?.[1] === undefined) return;
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.off('exit', onExit);
        child.stdout?.resume();
        const port = Number(match[1]);
        resolve({
          name: spec.name,
          port,
          baseUrl: `http://127.0.0.1:${port}`,
          pid: child.pid ?? -1,
          stderrTail: tail,
          stop: () => this.#stop(child),
          kill: () => this.#stop(child, 'SIGKILL'),
        });
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null): void =>
        fail(`exited before listening (code ${code ?? 'none'}, signal ${signal ?? 'none'})`);
      child.stdout?.on('data', onData);
      child.once('exit', onExit);
      child.once('error', (error) => fail(error.message));
    });
  }

  /** Runs a worker to completion and returns the JSON value of the last line it printed. */
  async runJson(spec: ChildSpec): Promise<unknown> {
    const last = (await this.runToEnd(spec)).trim().split('\n').at(-1) ?? '';
    try {
      return JSON.parse(last);
    } catch {
      throw new Error(`${spec.name}: last output line is not JSON: ${last.slice(0, 200)}`);
    }
  }

  /** Runs a child to completion and resolves with its stdout; rejects on a non-zero exit or at the bound. */
  runToEnd(spec: ChildSpec): Promise<string> {
    const child = this.#spawn(spec);
    const tail = captureTail(child);
    return new Promise<string>((resolve, reject) => {
      let stdout = '';
      const timer = setTimeout(() => {
        void this.#stop(child).then(() => reject(new Error(`${spec.name}: not done within ${spec.timeoutMs} ms\n${tail()}`)));
      }, spec.timeoutMs);
      child.stdout?.on('data', (chunk: Buffer) => {
        stdout += chunk.toString('utf8');
      });
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(new Error(`${spec.name}: ${error.message}`));
      });
      // 'close', not 'exit': it fires after stdout is drained.
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        this.#live.delete(child);
        if (code === 0) resolve(stdout);
        else reject(new Error(`${spec.name}: exited with code ${code ?? 'none'} (signal ${signal ?? 'none'})\n${tail()}`));
      });
    });
  }

  /** Stops every child still running; safe to call more than once. */
  async stopAll(): Promise<void> {
    await Promise.all([...this.#live].map((child) => this.#stop(child)));
  }

  /** For exit and signal handlers, which cannot wait: SIGKILL to every live process group. */
  killAllNow(): void {
    for (const child of this.#live) signalGroup(child, 'SIGKILL');
    this.#live.clear();
  }

  /**
   * For a worker process the bench starts (and stops by signalling its group): SIGTERM or SIGINT
   * kills these children first, whose groups are their own, then ends the worker. Without it a
   * worker's peer (grpc-echo, which has no IPC link to notice) outlived it. Returns the undo.
   */
  killOnSignals(): () => void {
    const end = (signal: NodeJS.Signals): void => {
      this.killAllNow();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    };
    process.once('SIGTERM', end);
    process.once('SIGINT', end);
    return () => {
      process.off('SIGTERM', end);
      process.off('SIGINT', end);
    };
  }

  #spawn(spec: ChildSpec): ChildProcess {
    const child = spawn(spec.command, [...spec.args], {
      cwd: spec.cwd,
      env: { ...process.env, ...spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so a server's own children stop with it. (The hook-runner a server
      // starts has a group of its own too; it exits when its IPC link to the server closes.)
      detached: true,
    });
    this.#live.add(child);
    child.once('exit', () => this.#live.delete(child));
    return child;
  }

  async #stop(child: ChildProcess, signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
    // No pid: the spawn itself failed ('error' was emitted) and there is nothing to wait for.
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) {
      this.#live.delete(child);
      return;
    }
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    signalGroup(child, signal);
    const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), GRACE_MS);
    await exited;
    clearTimeout(timer);
    this.#live.delete(child);
  }
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is already gone.
  }
}

function captureTail(child: ChildProcess): () => string {
  let tail = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-TAIL_BYTES);
  });
  return () => tail.trim();
}
