// Scenario 1, ingest: signed 1 KB webhooks, 64 connections, verified + deduplicated + durably stored
// before the answer; Sluice against the physical limit, the storage limit and a Fastify + SQLite build.

import type { LoadResult } from '../../load/load-result.ts';
import { createSigningSecret } from '../../load/signed-requests.ts';
import { curveLatencies, failedResult, judge, measuredRow, notYetMeasured, scenarioStatus, subjectToPeerRatios } from '../../result-helpers.ts';
import type { LatencyPoint, Scenario, ScenarioContext, ScenarioReport, SystemResult, TargetCheck } from '../../scenario.ts';
import { fastifySqlitePeer, uwsHmacPeer, type HttpSystem, type HttpTarget } from './http-system.ts';
import { curveRate, curveRequestCount, ingestSizes, measuredRequestCount, overCapacityNote, type IngestSizes } from './ingest-sizes.ts';
import { lmdbLoopMeta, measureLmdbLoop, measureLmdbLoopCurve } from './lmdb-loop-system.ts';
import { createLoadDriver, type LoadDriver } from './load-driver.ts';
import { sluiceSystem } from './sluice-system.ts';

/** Order matters: the first measured of Sluice, then Fastify + SQLite, sets the latency curve's reference peak. */
const HTTP_SYSTEMS: readonly { readonly system: HttpSystem; readonly reference: boolean }[] = [
  { system: sluiceSystem, reference: true },
  { system: fastifySqlitePeer, reference: true },
  { system: uwsHmacPeer, reference: false },
];

export const ingestScenario: Scenario = {
  name: 'ingest',
  title: 'Ingest: signed webhook -> verified, deduplicated, durable, answered',
  run: runIngest,
};

interface Reference {
  readonly system: string;
  readonly peakPerSec: number;
}

async function runIngest(context: ScenarioContext): Promise<ScenarioReport> {
  const sizes = ingestSizes(context.quick);
  const secret = createSigningSecret();
  const driver = createLoadDriver(context, sizes, secret);
  const systems: SystemResult[] = [];
  const curve: LatencyPoint[] = [];
  let reference: Reference | undefined;

  for (const { system, reference: canBeReference } of HTTP_SYSTEMS) {
    const measured = await measureHttpSystem(context, driver, sizes, system, secret, (peak) => {
      if (reference === undefined && canBeReference) reference = { system: system.system, peakPerSec: peak };
      return reference;
    });
    systems.push(measured.result);
    curve.push(...measured.curve);
  }
  const loop = await measureLmdbLoop(context, sizes);
  systems.push(loop);
  if (reference !== undefined) curve.push(...(await measureLmdbLoopCurve(context, sizes, reference.peakPerSec, loop.status === 'measured' ? loop.throughputPerSec : undefined)));

  return {
    scenario: 'ingest',
    title: ingestScenario.title,
    status: scenarioStatus(systems),
    unit: 'events/s',
    method: describeMethod(driver, sizes, reference),
    systems,
    ratios: subjectToPeerRatios(systems),
    latencyCurve: curve,
    targets: ingestTargets(systems, curve),
    notes: [
      'Durable = on disk before the answer: Sluice and the LMDB loop wait for the LMDB flush (fsync), SQLite runs WAL with synchronous=FULL; the uWS peer stores nothing.',
      `Each system runs in its own child process on a fresh data dir; the load generator is another process. Warm-up (${sizes.warmupRequests} requests) is not reported.`,
      'Closed-loop p50/p99 are latencies at saturation; latency at a given load is the curve below. The LMDB loop\'s curve rows are the storage floor at those rates (its own process, timer-paced, no HTTP).',
      ...headroomNotes(systems),
    ],
  };
}

function measuredThroughput(systems: readonly SystemResult[], name: string): number | undefined {
  return measuredRow(systems, name)?.throughputPerSec;
}

/** The uWS peer, driven by the same generator, shows how far above Sluice the generator and machine reach. */
function headroomNotes(systems: readonly SystemResult[]): string[] {
  const limit = measuredThroughput(systems, uwsHmacPeer.system);
  const sluice = measuredThroughput(systems, sluiceSystem.system);
  if (limit === undefined) return [];
  const floor = `The uWS rows of the latency curve are the floor of this generator on this machine at those rates.`;
  if (sluice === undefined) return [floor];
  const headroom = limit / sluice;
  return [
    headroom >= 1.5
      ? `Generator headroom: the same generator and connections drove the uWS peer to ${Math.round(limit)} events/s, ${headroom.toFixed(1)}x Sluice's peak, so the generator is not what limits Sluice.`
      : `WARNING: the uWS peer reached only ${headroom.toFixed(2)}x Sluice's peak with the same generator: the generator or the machine may be the bottleneck.`,
    floor,
  ];
}

interface HttpMeasurement {
  readonly result: SystemResult;
  readonly curve: readonly LatencyPoint[];
}

async function measureHttpSystem(
  context: ScenarioContext,
  driver: LoadDriver,
  sizes: IngestSizes,
  system: HttpSystem,
  secret: string,
  referenceAfter: (peakPerSec: number) => Reference | undefined,
): Promise<HttpMeasurement> {
  const meta = { system: system.system, label: system.label, role: system.role, work: system.work };
  const missing = system.missing(context);
  if (missing !== undefined) return { result: notYetMeasured(meta, missing), curve: [] };
  let target: HttpTarget | undefined;
  try {
    context.log(`ingest: starting ${system.label}`);
    target = await system.start(context, secret);
    const warmup = await driver.peak(target, sizes.warmupRequests);
    if (acceptedOf(warmup) === 0) throw new Error(`warm-up: no request was accepted (statuses ${JSON.stringify(warmup.statuses)})`);
    const count = measuredRequestCount(sizes, warmup.throughputPerSec);
    context.log(`ingest: ${system.label}: ${count} requests, closed loop (warm-up ran at ${Math.round(warmup.throughputPerSec)}/s)`);
    const peak = await driver.peak(target, count, warmup.throughputPerSec);
    const result: SystemResult = { ...meta, status: 'measured', ...fromLoad(peak) };
    const reference = referenceAfter(peak.throughputPerSec);
    const curve = reference === undefined ? [] : await measureCurve(context, driver, sizes, system.system, target, peak.throughputPerSec, reference);
    return { result, curve };
  } catch (error) {
    return { result: failedResult(meta, error), curve: [] };
  } finally {
    await target?.stop();
  }
}

async function measureCurve(
  context: ScenarioContext,
  driver: LoadDriver,
  sizes: IngestSizes,
  system: string,
  target: HttpTarget,
  ownPeakPerSec: number,
  reference: Reference,
): Promise<LatencyPoint[]> {
  const points: LatencyPoint[] = [];
  for (const fraction of sizes.curveFractions) {
    const rate = curveRate(fraction, reference.peakPerSec);
    const base = { system, fractionOfPeak: fraction, targetRatePerSec: rate };
    const over = overCapacityNote(rate, ownPeakPerSec);
    if (over !== undefined) {
      points.push({ ...base, status: 'over_capacity', note: over });
      continue;
    }
    const count = curveRequestCount(sizes, rate);
    context.log(`ingest: ${system}: open loop at ${rate}/s (${Math.round(fraction * 100)} % of ${reference.system} peak), ${count} requests`);
    const load = await driver.paced(target, count, rate);
    points.push({
      ...base,
      status: 'measured',
      achievedRatePerSec: load.throughputPerSec,
      completed: load.completed,
      errors: errorsOf(load),
      ...curveLatencies(load),
    });
  }
  return points;
}

/** 204 from the Node generator; wrk only tells 2xx from the rest. */
function acceptedOf(load: LoadResult): number {
  return (load.statuses['204'] ?? 0) + (load.statuses['2xx'] ?? 0);
}

/** Every request that was not accepted: wrong statuses (a duplicate is wrong here: ids are unique), lost, unanswered. */
function errorsOf(load: LoadResult): number {
  return load.completed - acceptedOf(load) + load.socketErrors + load.timedOut;
}

function fromLoad(load: LoadResult): Partial<SystemResult> {
  return {
    throughputPerSec: load.throughputPerSec,
    completed: load.completed,
    accepted: acceptedOf(load),
    errors: errorsOf(load),
    durationSec: load.durationSec,
    statuses: load.statuses,
    ...(load.p50Ms === undefined ? {} : { p50Ms: load.p50Ms }),
    ...(load.p99Ms === undefined ? {} : { p99Ms: load.p99Ms }),
  };
}

function describeMethod(driver: LoadDriver, sizes: IngestSizes, reference: Reference | undefined): string[] {
  const peak =
    driver.peakGenerator === 'wrk'
      ? `peak: wrk 4.1 (-t${sizes.wrkThreads} -c${sizes.connections}), closed loop, bench/load/wrk-pool.lua replaying a pre-generated pool once`
      : `peak: Node closed-loop generator (own process, ${sizes.connections} keep-alive connections) replaying a pre-generated pool once`;
  return [
    `requests: Standard Webhooks signed (HMAC-SHA256), unique webhook-id, fresh timestamp, ${sizes.payloadBytes} B JSON body, pre-signed before each run`,
    `${peak} (${driver.peakGeneratorNote})`,
    'curve: Node open-loop generator (own process), constant rate, latency from each request\'s scheduled send time (wrk2-style; wrk 4.1 cannot hold a rate and wrk2 is not packaged)',
    reference === undefined
      ? 'curve reference: none (neither Sluice nor Fastify + SQLite was measured)'
      : `curve reference: ${reference.system} peak ${Math.round(reference.peakPerSec)} events/s${reference.system === 'sluice' ? '' : ' (Sluice not measured)'}`,
  ];
}

/**
 * A row's throughput for a target, only when every request of it was stored: wrk counts answered
 * requests, and fast refusals (401, 409, 429) must never pass for ingest.
 */
function storedThroughput(systems: readonly SystemResult[], name: string): number | undefined {
  const row = measuredRow(systems, name);
  return row !== undefined && (row.errors ?? 0) === 0 ? row.throughputPerSec : undefined;
}

function ingestTargets(systems: readonly SystemResult[], curve: readonly LatencyPoint[]): TargetCheck[] {
  const sluice = storedThroughput(systems, sluiceSystem.system);
  const fastify = storedThroughput(systems, fastifySqlitePeer.system);
  // Only a point whose every request was stored: fast refusals must not pass for a low p99 either.
  const atHalfPeak = (system: string) => curve.find((p) => p.system === system && p.fractionOfPeak === 0.5 && p.status === 'measured' && (p.errors ?? 0) === 0);
  const halfPeak = atHalfPeak(sluiceSystem.system);
  const storageFloor = atHalfPeak(lmdbLoopMeta.system)?.p99Ms;
  return [
    judge('ingest.throughput', 'Sluice ingest >= 25,000 events/s', sluice, (v) => v >= 25_000, (v) => `${Math.round(v)} events/s`),
    judge(
      'ingest.vs_fastify_sqlite',
      'Sluice >= 2x Fastify + SQLite',
      sluice === undefined || fastify === undefined ? undefined : sluice / fastify,
      (v) => v >= 2,
      (v) => `${v.toFixed(2)}x`,
    ),
    judge('ingest.p99_at_half_peak', 'Sluice p99 <= 10 ms at 50 % of its peak', halfPeak?.p99Ms, (v) => v <= 10, (v) =>
      `${v.toFixed(2)} ms${storageFloor === undefined ? '' : ` (the bare LMDB loop at the same rate: p99 ${storageFloor.toFixed(2)} ms)`}`),
  ];
}
