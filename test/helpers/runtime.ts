// Test helpers: a real runtime (uWS on port 0, LMDB in a temp dir), in-process or as a child process.
// In-process runtimes take an injected clock; child runtimes can be SIGKILLed for crash tests.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Clock } from '../../runtime/clock.ts';
import type { EventRunsGate } from '../../runtime/events/event-runs-gate.ts';
import type { ReceiverResolver } from '../../runtime/runs/receiver-lookup.ts';
import { loadRuntimeConfig } from '../../runtime/config.ts';
import { createRuntime, type Runtime } from '../../runtime/create-runtime.ts';
import { createLogger, type Logger } from '../../runtime/log.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import type { FreeSpaceProbe } from '../../hook-runner/disk-floor.ts';
import { openMemoryLedger } from '../../runtime/ledger/memory-ledger.ts';
import type { SchemaCheckDeadlines } from '../../runtime/sources/schema-checks.ts';
import type { HookRunnerClientOptions } from '../../runtime/hook-runner/client.ts';
import { nodeThrough } from './fault-injection.ts';
import { withDefaults } from './default-args.ts';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';
export const ROOT = resolve(import.meta.dirname, '../..');

export function tempDir(prefix = 'sluice-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface TestRuntime {
  readonly runtime: Runtime;
  readonly url: string;
  readonly dataDir: string;
  close(): Promise<void>;
}

interface StartOptions {
  readonly clock?: Clock;
  readonly dataDir?: string;
  readonly args?: string[];
  readonly ledger?: Ledger;
  /** Default: silent. */
  readonly logger?: Logger;
  /** How the free space of the data dir's disk is read (disk-floor.ts); default statfs. */
  readonly freeDiskSpace?: FreeSpaceProbe;
  /** How long a schema check or compile may take; default the runtime's. */
  readonly schemaDeadlines?: SchemaCheckDeadlines;
  /** How webhook steps look up receivers' names; default the runtime's. */
  readonly receiverResolver?: ReceiverResolver;
  /** Projection rows one org may hold; default the runtime's. */
  readonly projectionRowCap?: number;
  /** Step results a running run may hold and keep its live actor; default the runtime's. */
  readonly restingResultBytes?: number;
  /** Deadlines of hook-runner calls; default the runtime's. */
  readonly runnerDeadlinesMs?: HookRunnerClientOptions['deadlinesMs'];
  /** What a refused device frame's reading cost is measured by; default the runtime's. */
  readonly deviceReadingClock?: () => number;
  /** Bytes every live socket together may hold queued; default the runtime's. */
  readonly liveQueueBytes?: number;
  /** The budget of runs the event writes in flight may build; default the runtime's. */
  readonly eventRuns?: EventRunsGate;
}

/**
 * The ledger a test runtime runs on: the one given, else with SLUICE_TEST_LEDGER=memory the
 * in-memory twin for a runtime on a fresh data dir (one reopened on a kept dir stays on LMDB),
 * else the default LMDB ledger.
 */
function testLedger(options: StartOptions): Ledger | undefined {
  if (options.ledger !== undefined) return options.ledger;
  return process.env['SLUICE_TEST_LEDGER'] === 'memory' && options.dataDir === undefined ? openMemoryLedger() : undefined;
}

export async function startRuntime(options: StartOptions = {}): Promise<TestRuntime> {
  const ledger = testLedger(options);
  const dataDir = options.dataDir ?? tempDir();
  // Tests' receivers are local, so webhook steps may reach any address unless a test asks otherwise.
  const config = loadRuntimeConfig(withDefaults(['--port', '0', '--data-dir', dataDir, '--admin-token', ADMIN_TOKEN, '--webhook-targets', 'any'], options.args), {});
  const runtime = await createRuntime(config, {
    logger: options.logger ?? createLogger('silent'),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(ledger === undefined ? {} : { ledger }),
    ...(options.freeDiskSpace === undefined ? {} : { freeDiskSpace: options.freeDiskSpace }),
    ...(options.schemaDeadlines === undefined ? {} : { schemaDeadlines: options.schemaDeadlines }),
    ...(options.receiverResolver === undefined ? {} : { receiverResolver: options.receiverResolver }),
    ...(options.projectionRowCap === undefined ? {} : { projectionRowCap: options.projectionRowCap }),
    ...(options.restingResultBytes === undefined ? {} : { restingResultBytes: options.restingResultBytes }),
    ...(options.runnerDeadlinesMs === undefined ? {} : { runnerDeadlinesMs: options.runnerDeadlinesMs }),
    ...(options.deviceReadingClock === undefined ? {} : { deviceReadingClock: options.deviceReadingClock }),
    ...(options.liveQueueBytes === undefined ? {} : { liveQueueBytes: options.liveQueueBytes }),
    ...(options.eventRuns === undefined ? {} : { eventRuns: options.eventRuns }),
  });
  return {
    runtime,
    url: runtime.url,
    dataDir,
    close: async () => {
      await runtime.close();
      if (options.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface ChildRuntime {
  readonly child: ChildProcess;
  readonly url: string;
  readonly output: string[];
  /** Resolves with the exit code (or signal) once the process has ended. */
  readonly exited: Promise<number | string>;
}

/**
 * Starts `sluice serve` as a child process on the given data dir and waits for its port. It runs
 * with ADMIN_TOKEN unless `adminToken` is 'file' (the runtime then creates or reads its token file);
 * `nodeArgs` go to Node itself (a heap limit, say); `launcher`, words that exec the command
 * (fault-injection.ts), keeps the child's pid Node's.
 */
export function spawnRuntime(dataDir: string, command: 'serve' | 'dev' = 'serve', extraArgs: string[] = [], adminToken: 'fixed' | 'file' = 'fixed', nodeArgs: string[] = [], launcher: readonly string[] = []): Promise<ChildRuntime> {
  const token = adminToken === 'fixed' ? ['--admin-token', ADMIN_TOKEN] : [];
  const child = spawn(
    ...nodeThrough(launcher, [...nodeArgs, '--import', 'tsx', join(ROOT, 'runtime/cli.ts'), command, ...withDefaults(['--port', '0', '--data-dir', dataDir, ...token, '--log-level', 'warn', '--webhook-targets', 'any'], extraArgs)]),
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output: string[] = [];
  const exited = new Promise<number | string>((done) => child.once('exit', (code, signal) => done(code ?? signal ?? 'unknown')));
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
  return new Promise((resolveStart, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      output.push(line);
      const match = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
      if (match?.[1] !== undefined) resolveStart({ child, url: match[1], output, exited });
    });
    exited.then((code) => reject(new Error(`runtime exited (${code}) before listening:\n${output.join('\n')}`)));
  });
}
