// Test fixture for the hook-runner: the real runner process (spawned by the real supervisor) on a
// temp data dir, a real gRPC client, and bounded polling for the few waits on processes.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { lockDataDir } from '../../hook-runner/dir-lock.ts';
import { pruneRunnerRecords } from '../../hook-runner/record-pruning.ts';
import { HookRunnerChild, type HookRunnerChildOptions } from '../../runtime/hook-runner/child.ts';
import { HookRunnerClient, type HookRunnerClientOptions, type InvokeInput } from '../../runtime/hook-runner/client.ts';
import { assembleWat, ECHO_WAT } from './hook-runner-wat.ts';
import { nodeThrough } from './fault-injection.ts';

export const newToken = (): string => randomBytes(24).toString('base64url');
export const newMasterKey = (): string => randomBytes(32).toString('hex');

const created: string[] = [];

/** A fresh data dir, removed when the test process exits. */
export function tempDataDir(): string {
  if (created.length === 0) {
    process.once('exit', () => {
      for (const dir of created) rmSync(dir, { recursive: true, force: true });
    });
  }
  const dir = mkdtempSync(join(tmpdir(), 'sluice-hook-runner-'));
  created.push(dir);
  return dir;
}

/**
 * Holds the lock of the runner store of `dataDir` in this process: a runner started on it then
 * exits 1 at every start ("in use"), which its supervisor restarts after its backoff, as it would
 * one that crashed. Returns the release.
 */
export function holdRunnerStore(dataDir: string): () => void {
  const dir = join(dataDir, 'hook-runner');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return lockDataDir(dir, 'hook-runner');
}

export interface RunnerFixture {
  readonly dataDir: string;
  readonly token: string;
  readonly masterKey: string;
  readonly child: HookRunnerChild;
  readonly client: HookRunnerClient;
  /** Child output, for asserting what the runner logged. */
  readonly logLines: string[];
  /** Stops the child and starts a new one on the same data dir (client follows the address). */
  restart(): Promise<void>;
  /** Stops the runner; `keepData` leaves the data dir for a later fixture. */
  close(options?: { keepData?: boolean }): Promise<void>;
}

export interface RunnerFixtureOptions {
  readonly dataDir?: string;
  /** The runner token; default: a new random one (a runtime reads its own from `<its data dir>/runner-token`). */
  readonly token?: string;
  readonly masterKey?: string;
  readonly client?: HookRunnerClientOptions;
  readonly child?: Partial<HookRunnerChildOptions>;
}

export async function startRunner(options: RunnerFixtureOptions = {}): Promise<RunnerFixture> {
  const dataDir = options.dataDir ?? tempDataDir();
  const token = options.token ?? newToken();
  const masterKey = options.masterKey ?? newMasterKey();
  const logLines: string[] = [];
  const spawnChild = async (): Promise<HookRunnerChild> => {
    const child = new HookRunnerChild({
      dataDir,
      token,
      masterKey,
      restartDelayMs: () => 20,
      log: (line) => void logLines.push(line),
      ...options.child,
    });
    await child.start();
    return child;
  };
  let child = await spawnChild();
  const client = new HookRunnerClient(() => child.address(), token, options.client);
  return {
    dataDir,
    token,
    masterKey,
    get child() { return child; },
    client,
    logLines,
    async restart() {
      await child.stop();
      child = await spawnChild();
    },
    async close({ keepData = false } = {}) {
      client.close();
      await child.stop();
      if (!keepData) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A runner with the echo guest compiled (answers its envelope back): where most runner tests start. */
export async function startRunnerWithEcho(options: RunnerFixtureOptions = {}): Promise<{ runner: RunnerFixture; echo: string }> {
  const runner = await startRunner(options);
  return { runner, echo: await runner.client.compile(await assembleWat('echo', ECHO_WAT)) };
}

/** The runner's own prune, noting each pass's cut (its `nowMs`) in `cuts` once the pass is over (one starting while another runs is skipped). */
export const pruneNotingCuts = (cuts: number[]): typeof pruneRunnerRecords => async (...args) => {
  const pruned = await pruneRunnerRecords(...args);
  cuts.push(args[1]);
  return pruned;
};

/** Polls `condition` until it holds; fails after `timeoutMs`. For waits on other processes only. */
export async function waitFor(condition: () => boolean | Promise<boolean>, description: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A recorded invocation with sensible defaults; override what the test is about. */
export const invocation = (digest: string, overrides: Partial<InvokeInput> = {}): InvokeInput => ({
  orgId: 'org_test',
  actionId: 'act_test',
  digest,
  permissions: [],
  payloadJson: '{}',
  idempotencyKey: `run_${randomBytes(6).toString('hex')}:step_1`,
  fence: 1,
  ...overrides,
});

export const parseOutput = (outputJson: string): Record<string, unknown> => JSON.parse(outputJson) as Record<string, unknown>;

const MAIN = fileURLToPath(new URL('../../hook-runner/main.ts', import.meta.url));

export interface RunnerProcess {
  readonly process: ChildProcess;
  readonly output: string[];
  /** Resolves with the bound address, or rejects with the output if the process exits first. */
  readonly listening: Promise<string>;
  readonly exited: Promise<number | null>;
}

/**
 * `sluice hook-runner` as its own process (hook-runner/main.ts), with none of this process's SLUICE_
 * variables; `launcher`, words that exec the command (fault-injection.ts), keeps the pid Node's.
 */
export function spawnRunnerCommand(args: readonly string[], env: NodeJS.ProcessEnv = {}, cwd?: string, launcher: readonly string[] = []): RunnerProcess {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SLUICE_')));
  const child = spawn(...nodeThrough(launcher, ['--import', import.meta.resolve('tsx'), MAIN, ...args]), { env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...(cwd === undefined ? {} : { cwd }) });
  const output: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const listening = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      output.push(line);
      if (line.startsWith('hook-runner listening on ')) resolve(line.slice('hook-runner listening on '.length));
    });
    createInterface({ input: child.stderr! }).on('line', (line) => void output.push(line));
    void exited.then((code) => reject(new Error(`runner exited with ${code}:\n${output.join('\n')}`)));
  });
  listening.catch(() => undefined);
  return { process: child, output, listening, exited };
}
