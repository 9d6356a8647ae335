// Drives wrk (Debian's wrk 4.1, installed with apt-get when missing) with bench/load/wrk-pool.lua:
// closed-loop peak load from a pool of pre-signed requests, each sent exactly once.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcesses } from '../harness/children.ts';
import { ensureDebianTool, type ToolAvailability } from '../harness/debian-tool.ts';
import type { LoadResult, LoadSpec } from './load-result.ts';

const SCRIPT = join(import.meta.dirname, 'wrk-pool.lua');

/** Finds wrk; when missing and allowed (root), installs it with apt-get (update first). */
export function ensureWrk(installMissing: boolean, log: (line: string) => void): ToolAvailability {
  // wrk has no --version exit code to trust (it prints usage and exits 1); finding the binary is enough.
  const present = (): boolean => spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined;
  return ensureDebianTool({ command: 'wrk', installArgs: ['wrk'], present }, installMissing, log);
}

/** Closed-loop run of `spec.count` pooled requests over `spec.connections` connections and `threads` wrk threads. */
export async function runWrk(children: ChildProcesses, spec: LoadSpec, threads: number, resultFile: string): Promise<LoadResult> {
  if (spec.ratePerSec !== undefined) throw new Error('wrk 4.1 cannot hold a constant rate; use the Node open-loop generator');
  const threadCount = Math.max(1, Math.min(threads, spec.connections));
  await children.runToEnd({
    name: 'wrk',
    command: 'wrk',
    args: [
      `-t${threadCount}`,
      `-c${spec.connections}`,
      `-d${Math.ceil(spec.timeoutMs / 1000)}s`,
      // wrk leaves an answer slower than --timeout out of its latencies (errors.timeout): no sooner than the run's bound.
      '--timeout',
      `${Math.ceil(spec.timeoutMs / 1000)}s`,
      '-s',
      SCRIPT,
      `http://127.0.0.1:${spec.port}${spec.path}`,
    ],
    cwd: import.meta.dirname,
    env: { BENCH_POOL: spec.poolFile, BENCH_PATH: spec.path, BENCH_THREADS: String(threadCount), BENCH_CONNECTIONS: String(spec.connections), BENCH_OUT: resultFile },
    timeoutMs: spec.timeoutMs + 30_000,
  });
  return parseWrkResult(readFileSync(resultFile, 'utf8'), spec.count);
}

interface WrkOutput {
  readonly requests: number;
  readonly durationUs: number;
  readonly errors: { readonly connect: number; readonly read: number; readonly write: number; readonly status: number; readonly timeout: number };
  readonly latencyUs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number };
}

export function parseWrkResult(text: string, count: number): LoadResult {
  const out = JSON.parse(text) as WrkOutput;
  if (typeof out.requests !== 'number' || typeof out.durationUs !== 'number' || typeof out.errors !== 'object') {
    throw new Error(`unexpected wrk result: ${text.slice(0, 200)}`);
  }
  const durationSec = Math.max(1e-9, out.durationUs / 1e6);
  const socketErrors = out.errors.connect + out.errors.read + out.errors.write;
  return {
    generator: 'wrk',
    // wrk counts answers past --timeout as requests (without their latency): here they are not
    // completed but timed out, so each is one error, not two (not accepted, and timed out).
    completed: out.requests - out.errors.timeout,
    // wrk counts only statuses above 399; the pools never cause a redirect, so the rest succeeded.
    statuses: { '2xx': out.requests - out.errors.status - out.errors.timeout, 'non-2xx': out.errors.status },
    socketErrors,
    timedOut: Math.max(0, count - out.requests) + out.errors.timeout,
    durationSec,
    throughputPerSec: out.requests / durationSec,
    ...(out.requests === 0
      ? {}
      : {
          p50Ms: out.latencyUs.p50 / 1000,
          p90Ms: out.latencyUs.p90 / 1000,
          p99Ms: out.latencyUs.p99 / 1000,
          maxMs: out.latencyUs.max / 1000,
        }),
  };
}
