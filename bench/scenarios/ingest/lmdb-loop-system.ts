// Peer (b) as scenario rows: runs bench/peers/lmdb-commit-loop.ts in its own process on a fresh
// data dir and turns its JSON into a result. No HTTP: this is the storage engine's own ceiling
// (closed loop) and its own latency at the rates of the curve (open loop), the floor under Sluice's.

import { join } from 'node:path';
import type { LoopResult, LoopSpec } from '../../peers/lmdb-commit-loop.ts';
import { curveLatencies, failedResult, type SystemMeta } from '../../result-helpers.ts';
import type { LatencyPoint, ScenarioContext, SystemResult } from '../../scenario.ts';
import { curveRate, curveRequestCount, overCapacityNote, type IngestSizes } from './ingest-sizes.ts';

export const lmdbLoopMeta: SystemMeta = {
  system: 'lmdb-commit-loop',
  label: 'bare LMDB commit loop (storage limit)',
  role: 'peer',
  work: 'per event the same 5 records as Sluice stores (claim + index, event + index, recording) in one ifNoExists write; 64 writers, each awaits its own flush; no HTTP, no HMAC',
};

async function runLoop(context: ScenarioContext, spec: LoopSpec): Promise<LoopResult> {
  const value = await context.children.runJson({
    name: lmdbLoopMeta.system,
    command: process.execPath,
    args: ['--import', 'tsx', join(context.repoRoot, 'bench', 'peers', 'lmdb-commit-loop.ts'), JSON.stringify(spec)],
    cwd: context.repoRoot,
    timeoutMs: 60_000 + spec.count,
  });
  const result = value as Partial<LoopResult>;
  if (typeof result.completed !== 'number' || typeof result.throughputPerSec !== 'number') {
    throw new Error(`unexpected LMDB loop result: ${JSON.stringify(value).slice(0, 200)}`);
  }
  return result as LoopResult;
}

const loopSpec = (context: ScenarioContext, sizes: IngestSizes, count: number, ratePerSec?: number): LoopSpec => ({
  dataDir: context.tempDirs.make('lmdb-loop'),
  warmup: sizes.lmdbWarmup,
  count,
  writers: sizes.connections,
  payloadBytes: sizes.payloadBytes,
  ...(ratePerSec === undefined ? {} : { ratePerSec }),
});

export async function measureLmdbLoop(context: ScenarioContext, sizes: IngestSizes): Promise<SystemResult> {
  try {
    context.log(`ingest: ${lmdbLoopMeta.label}, ${sizes.lmdbRecords} records`);
    const result = await runLoop(context, loopSpec(context, sizes, sizes.lmdbRecords));
    return {
      ...lmdbLoopMeta,
      status: 'measured',
      throughputPerSec: result.throughputPerSec,
      completed: result.completed,
      accepted: result.accepted,
      errors: result.completed - result.accepted,
      durationSec: result.durationSec,
      ...(result.p50Ms === undefined ? {} : { p50Ms: result.p50Ms }),
      ...(result.p99Ms === undefined ? {} : { p99Ms: result.p99Ms }),
    };
  } catch (error) {
    return failedResult(lmdbLoopMeta, error);
  }
}

/**
 * The loop at each rate of the curve (fractions of the reference peak): the storage's own latency
 * there. A rate near or above the loop's own peak (`ownPeakPerSec`, in a slow disk phase) is not
 * offered, as for every system.
 */
export async function measureLmdbLoopCurve(context: ScenarioContext, sizes: IngestSizes, referencePeakPerSec: number, ownPeakPerSec: number | undefined): Promise<LatencyPoint[]> {
  const points: LatencyPoint[] = [];
  for (const fraction of sizes.curveFractions) {
    const rate = curveRate(fraction, referencePeakPerSec);
    const base = { system: lmdbLoopMeta.system, fractionOfPeak: fraction, targetRatePerSec: rate };
    const over = overCapacityNote(rate, ownPeakPerSec);
    if (over !== undefined) {
      points.push({ ...base, status: 'over_capacity', note: over });
      continue;
    }
    const count = curveRequestCount(sizes, rate);
    context.log(`ingest: ${lmdbLoopMeta.label}: open loop at ${rate}/s, ${count} records`);
    try {
      const result = await runLoop(context, loopSpec(context, sizes, count, rate));
      points.push({
        ...base,
        status: 'measured',
        achievedRatePerSec: result.throughputPerSec,
        completed: result.completed,
        errors: result.completed - result.accepted,
        ...curveLatencies(result),
      });
    } catch (error) {
      const { note } = failedResult(lmdbLoopMeta, error);
      points.push({ ...base, status: 'failed', ...(note === undefined ? {} : { note }) });
    }
  }
  return points;
}
