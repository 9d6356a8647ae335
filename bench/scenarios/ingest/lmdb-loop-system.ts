// Peer (b) as a scenario row: runs bench/peers/lmdb-commit-loop.ts in its own process on a fresh
// data dir and turns its JSON into a result. No HTTP: this is the storage engine's own ceiling.

import { join } from 'node:path';
import type { LoopResult, LoopSpec } from '../../peers/lmdb-commit-loop.ts';
import { failedResult, type SystemMeta } from '../../result-helpers.ts';
import type { ScenarioContext, SystemResult } from '../../scenario.ts';
import type { IngestSizes } from './ingest-sizes.ts';

export const lmdbLoopMeta: SystemMeta = {
  system: 'lmdb-commit-loop',
  label: 'bare LMDB commit loop (storage limit)',
  role: 'peer',
  work: 'per event the same 5 records as Sluice (claim + index, event + index, recording) in one ifNoExists write; 64 writers, each awaits root.flushed; no HTTP, no HMAC',
};

export async function measureLmdbLoop(context: ScenarioContext, sizes: IngestSizes): Promise<SystemResult> {
  const spec: LoopSpec = {
    dataDir: context.tempDirs.make('lmdb-loop'),
    warmup: sizes.lmdbWarmup,
    count: sizes.lmdbRecords,
    writers: sizes.connections,
    payloadBytes: sizes.payloadBytes,
  };
  try {
    context.log(`ingest: ${lmdbLoopMeta.label}, ${spec.count} records`);
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
    return {
      ...lmdbLoopMeta,
      status: 'measured',
      throughputPerSec: result.throughputPerSec,
      completed: result.completed,
      accepted: result.accepted ?? 0,
      errors: result.completed - (result.accepted ?? 0),
      durationSec: result.durationSec ?? 0,
      ...(result.p50Ms === undefined ? {} : { p50Ms: result.p50Ms }),
      ...(result.p99Ms === undefined ? {} : { p99Ms: result.p99Ms }),
    };
  } catch (error) {
    return failedResult(lmdbLoopMeta, error);
  }
}
