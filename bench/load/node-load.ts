// Runs the Node load generator (node-load-worker.ts) in its own child process, so it never
// shares an event loop with the server it measures, and returns its result.

import { join } from 'node:path';
import type { ChildProcesses } from '../harness/children.ts';
import type { LoadResult, LoadSpec } from './load-result.ts';

const WORKER = join(import.meta.dirname, 'node-load-worker.ts');

/** Closed loop when `spec.ratePerSec` is absent, open loop (fixed schedule) otherwise. */
export async function runNodeLoad(children: ChildProcesses, spec: LoadSpec, repoRoot: string): Promise<LoadResult> {
  const value = await children.runJson({
    name: spec.ratePerSec === undefined ? 'node load generator (closed loop)' : 'node load generator (open loop)',
    command: process.execPath,
    args: ['--import', 'tsx', WORKER, JSON.stringify(spec)],
    cwd: repoRoot,
    timeoutMs: spec.timeoutMs + 30_000,
  });
  return parseLoadResult(value);
}

function parseLoadResult(value: unknown): LoadResult {
  if (typeof value !== 'object' || value === null) throw new Error('load generator printed no result object');
  const result = value as Partial<LoadResult>;
  if (typeof result.completed !== 'number' || typeof result.durationSec !== 'number' || typeof result.statuses !== 'object') {
    throw new Error(`load generator result has the wrong shape: ${JSON.stringify(value).slice(0, 200)}`);
  }
  return result as LoadResult;
}
