// Times a series of calls, sequentially (latency of each) or with a fixed number in flight
// (throughput), and turns it into a CallRun. A call answers whether it ended the expected way.

import { performance } from 'node:perf_hooks';
import { summarizeLatencies } from '../../harness/stats.ts';
import type { CallRun } from './wasm-protocol.ts';

/** Resolves `true` for the expected outcome; a string is an unexpected outcome, kept for the report. */
export type Call = (index: number) => Promise<true | string>;

interface Tally {
  ok: number;
  firstError: string | undefined;
}

function record(tally: Tally, outcome: true | string): void {
  if (outcome === true) tally.ok += 1;
  else tally.firstError ??= outcome;
}

function toRun(module: string, mode: string, concurrency: number, count: number, tally: Tally, durationMs: number, latencies?: Float64Array): CallRun {
  const summary = latencies === undefined ? undefined : summarizeLatencies(latencies, count);
  const durationSec = durationMs / 1000;
  return {
    module,
    mode,
    concurrency,
    completed: count,
    ok: tally.ok,
    durationSec,
    throughputPerSec: count / durationSec,
    ...(summary === undefined ? {} : { p50Ms: summary.p50Ms, p99Ms: summary.p99Ms }),
    ...(tally.firstError === undefined ? {} : { firstError: tally.firstError }),
  };
}

/** One call at a time; every call's latency is kept. */
export async function measureSequential(module: string, mode: string, count: number, call: Call): Promise<CallRun> {
  const latencies = new Float64Array(count);
  const tally: Tally = { ok: 0, firstError: undefined };
  const started = performance.now();
  for (let i = 0; i < count; i += 1) {
    const t0 = performance.now();
    record(tally, await call(i));
    latencies[i] = performance.now() - t0;
  }
  return toRun(module, mode, 1, count, tally, performance.now() - started, latencies);
}

/** `concurrency` callers share `count` calls; latency is per call under that load. */
export async function measureConcurrent(module: string, mode: string, count: number, concurrency: number, call: Call): Promise<CallRun> {
  const latencies = new Float64Array(count);
  const tally: Tally = { ok: 0, firstError: undefined };
  let next = 0;
  const caller = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      const t0 = performance.now();
      record(tally, await call(i));
      latencies[i] = performance.now() - t0;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, caller));
  return toRun(module, mode, concurrency, count, tally, performance.now() - started, latencies);
}

/** Warm-up: the same calls, not reported; fails fast when the module does not even work. */
export async function warmUp(module: string, count: number, call: Call): Promise<void> {
  for (let i = 0; i < count; i += 1) {
    const outcome = await call(i);
    if (outcome !== true) throw new Error(`${module}: warm-up call ${i} failed: ${outcome}`);
  }
}
