// Applies ingest load to a started target: writes a fresh pool of signed requests (unique ids,
// current timestamp) for every run, hands it to wrk or the Node generator, and deletes it afterwards.

import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { LoadResult, LoadSpec } from '../../load/load-result.ts';
import { runNodeLoad } from '../../load/node-load.ts';
import { writeRequestPool } from '../../load/signed-requests.ts';
import { ensureWrk, runWrk } from '../../load/wrk.ts';
import type { ScenarioContext } from '../../scenario.ts';
import type { HttpTarget } from './http-system.ts';
import type { IngestSizes } from './ingest-sizes.ts';

export interface LoadDriver {
  /** Which generator runs the closed-loop (peak) runs, and why. */
  readonly peakGenerator: 'wrk' | 'node';
  readonly peakGeneratorNote: string;
  /**
   * Closed loop: `count` requests over all connections, each sent as soon as one is answered.
   * `expectedRatePerSec` (from a warm-up) tightens the time bound; without it the bound assumes a slow system.
   */
  peak(target: HttpTarget, count: number, expectedRatePerSec?: number): Promise<LoadResult>;
  /** Open loop at `ratePerSec` (always the Node generator: wrk 4.1 has no constant-rate mode). */
  paced(target: HttpTarget, count: number, ratePerSec: number): Promise<LoadResult>;
}

/** Assumed sustainable rate when sizing a bound: a run slower than this is failing anyway. */
const SLOWEST_RATE_PER_SEC = 200;
/** A measured run may be this many times slower than its warm-up before the bound stops it. */
const SLOWDOWN_ALLOWED = 4;

export function createLoadDriver(context: ScenarioContext, sizes: IngestSizes, secret: string): LoadDriver {
  const poolDir = context.tempDirs.make('pools');
  let runs = 0;
  const { peakGenerator, peakGeneratorNote } = chooseGenerator(context);

  const withPool = async (count: number, run: (poolFile: string) => Promise<LoadResult>): Promise<LoadResult> => {
    runs += 1;
    const poolFile = join(poolDir, `pool-${runs}.tsv`);
    writeRequestPool({ file: poolFile, count, idPrefix: `r${runs}`, secret, payloadBytes: sizes.payloadBytes, nowSec: Math.floor(Date.now() / 1000) });
    try {
      return await run(poolFile);
    } finally {
      rmSync(poolFile, { force: true });
    }
  };

  const spec = (target: HttpTarget, poolFile: string, count: number, boundSec: number): LoadSpec => ({
    port: target.port,
    path: target.path,
    poolFile,
    count,
    connections: sizes.connections,
    timeoutMs: Math.ceil(boundSec * 1000) + 10_000,
  });

  return {
    peakGenerator,
    peakGeneratorNote,
    peak: (target, count, expectedRatePerSec) =>
      withPool(count, (poolFile) => {
        const floorRate = Math.max(SLOWEST_RATE_PER_SEC, (expectedRatePerSec ?? 0) / SLOWDOWN_ALLOWED);
        const load = spec(target, poolFile, count, count / floorRate);
        return peakGenerator === 'wrk'
          ? runWrk(context.children, load, sizes.wrkThreads, `${poolFile}.wrk.json`)
          : runNodeLoad(context.children, load, context.repoRoot);
      }),
    paced: (target, count, ratePerSec) =>
      withPool(count, (poolFile) =>
        runNodeLoad(context.children, { ...spec(target, poolFile, count, (count / ratePerSec) * 3), ratePerSec }, context.repoRoot),
      ),
  };
}

function chooseGenerator(context: ScenarioContext): { peakGenerator: 'wrk' | 'node'; peakGeneratorNote: string } {
  if (context.loadGenerator === 'node') return { peakGenerator: 'node', peakGeneratorNote: 'Node closed-loop generator chosen with --load node' };
  const wrk = ensureWrk(context.installMissing, context.log);
  if (wrk.available) return { peakGenerator: 'wrk', peakGeneratorNote: wrk.note };
  if (context.loadGenerator === 'wrk') throw new Error(`--load wrk, but ${wrk.note}`);
  return { peakGenerator: 'node', peakGeneratorNote: `${wrk.note}; using the Node closed-loop generator instead` };
}
