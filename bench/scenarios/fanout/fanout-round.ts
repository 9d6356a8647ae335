// One fan-out measurement ("round"): connect the subscribers to a system's room, start runs at a fixed
// rate, let the system settle, collect what every subscriber got, and turn it into a row or a curve point.

import { performance } from 'node:perf_hooks';
import type { SystemMeta } from '../../result-helpers.ts';
import type { LatencyPoint, SystemResult } from '../../scenario.ts';
import { startCpuWindow } from '../runs/bench-cpu.ts';
import { UPDATES_PER_RUN, type FanoutSizes } from './fanout-sizes.ts';
import { lagPercentile } from './lag-histogram.ts';
import { runPaced, type PacedOutcome, type RunSource } from './paced-runs.ts';
import type { RoundResult, SubscriberPool } from './subscriber-pool.ts';

/** A room with a source of runs behind it: a fresh org on Sluice, or a fresh driver on the peer. */
export interface RoomSource extends RunSource {
  readonly liveUrl: string;
  /** Resolves once every started run's last update is out: the updates published in all, and remarks. */
  settle(timeoutMs: number): Promise<{ published: number; remarks: readonly string[] }>;
  close(): void;
}

/** Sluice or the peer, already running: opens a room per round and reports its own CPU. */
export interface FanoutSystem {
  openRoom(orgId: string): Promise<RoomSource>;
  cpuSeconds(): Promise<number | undefined>;
}

export interface RoundPlan {
  readonly subscribers: number;
  readonly runsPerSec: number;
}

export interface Measurement {
  readonly plan: RoundPlan;
  readonly round: RoundResult;
  readonly paced: PacedOutcome;
  /** Run updates the system put out: what each subscriber should have. */
  readonly published: number;
  readonly remarks: readonly string[];
  readonly serverCpuCores: number | undefined;
  readonly benchCpuCores: number;
}

/** A fresh room per round: seqs start at 1, which the exactly-once check relies on. */
export async function measureRound(pool: SubscriberPool, system: FanoutSystem, orgId: string, plan: RoundPlan, sizes: FanoutSizes): Promise<Measurement> {
  const room = await system.openRoom(orgId);
  try {
    await pool.connect(room.liveUrl, plan.subscribers);
    const benchCpu = startCpuWindow();
    const cpuBefore = await system.cpuSeconds();
    const started = performance.now();
    const paced = await runPaced(pool, room, {
      runsPerSec: plan.runsPerSec,
      warmupSec: sizes.warmupSec,
      measureSec: sizes.measureSec,
      maxBacklogUpdates: Math.max(50, Math.round(plan.runsPerSec * UPDATES_PER_RUN * sizes.maxBacklogSec)),
      maxPauseMs: sizes.drainTimeoutMs,
    });
    const { published, remarks } = await room.settle(sizes.drainTimeoutMs);
    const round = await pool.finish(published, sizes.drainTimeoutMs);
    const cpuAfter = await system.cpuSeconds();
    const wallSec = (performance.now() - started) / 1000;
    return {
      plan,
      round,
      paced,
      published,
      remarks,
      serverCpuCores: cpuBefore === undefined || cpuAfter === undefined ? undefined : (cpuAfter - cpuBefore) / wallSec,
      benchCpuCores: benchCpu(),
    };
  } finally {
    room.close();
  }
}

/** How a round's deliveries/s was measured: over the updates stamped in the window, or (none was) over what arrived in it. */
interface Rate {
  readonly perSec: number;
  readonly basis: 'stamped' | 'received';
}

/**
 * Deliveries per second over the measured receipts. A system so far behind that its sending paused
 * before the window and never resumed sent nothing in it: then the updates that reached the
 * subscribers during the window (the warm-up's backlog) give its rate at its own pace, without lag.
 * Undefined when nothing arrived in the window at all.
 */
function deliveriesPerSec(m: Measurement): Rate | undefined {
  const { measuredUpdates, measuredSpanMs, receivedInWindow, receivedSpanMs } = m.round;
  if (measuredUpdates > 0 && measuredSpanMs > 0) return { perSec: measuredUpdates / (measuredSpanMs / 1000), basis: 'stamped' };
  // Only when nothing was sent in the window: runs started in it whose updates never came are lost, not slow.
  if (m.paced.runsInWindow === 0 && receivedInWindow > 0 && receivedSpanMs > 0) return { perSec: receivedInWindow / (receivedSpanMs / 1000), basis: 'received' };
  return undefined;
}

/** Said in a row or point whose rate is over what arrived, not over what was sent in the window. */
const RECEIVED_BASIS_NOTE = 'no update was sent inside the measured window (sending paused for all of it): deliveries/s is what reached the subscribers during the window, at the system\'s own pace; lag not measured';

/** Deliveries lost or repeated, subscribers without every seq exactly once, frames that did not scan. */
function errorsOf(m: Measurement): number {
  const r = m.round;
  return Math.abs(m.published * m.plan.subscribers - r.updates) + (r.subscribers - r.complete) + r.badFrames + r.checkMismatches;
}

function describe(m: Measurement, sizes: FanoutSizes): string[] {
  const { round, paced, plan } = m;
  const details = [
    `${paced.runs} runs at ${Number(plan.runsPerSec.toFixed(2))}/s offered = ${Math.round(plan.runsPerSec * UPDATES_PER_RUN * plan.subscribers).toLocaleString('en-US')} deliveries/s`,
    ...m.remarks,
    `${round.complete}/${round.subscribers} subscribers got each of the ${m.published} updates once`,
    ...Object.entries(round.closedByCode).map(([code, n]) => `${n} closed with ${code}`),
    paced.pauses > 0 ? `sending paused ${paced.pauses}x (${paced.pausedSec.toFixed(1)} s): subscribers > ${sizes.maxBacklogSec} s of offered updates behind` : 'never paused',
    `frame ${round.updates === 0 ? '?' : Math.round(round.bytes / (round.updates + round.heartbeats))} B`,
    m.serverCpuCores === undefined ? 'server CPU unknown' : `server CPU ${(m.serverCpuCores * 100).toFixed(0)} %`,
    `subscriber workers CPU ${round.workerCpuCores.map((c) => `${(c * 100).toFixed(0)} %`).join(' + ')}`,
    `bench ${(m.benchCpuCores * 100).toFixed(0)} %`,
  ];
  if (round.outOfOrder > 0) details.push(`${round.outOfOrder} deliveries came after a higher seq (published out of seq order; none lost)`);
  if (round.badFrames + round.checkMismatches > 0) details.push(`${round.badFrames} bad frames, ${round.checkMismatches}/${round.checkedFrames} scan mismatches`);
  return details;
}

export function toRow(meta: SystemMeta, m: Measurement, sizes: FanoutSizes): SystemResult {
  const rate = deliveriesPerSec(m);
  const details = describe(m, sizes);
  if (rate === undefined) return { ...meta, status: 'failed', note: `no measured deliveries: ${details.join('; ')}` };
  if (rate.basis === 'received') details.unshift(RECEIVED_BASIS_NOTE);
  const p50 = lagPercentile(m.round.lag, 50);
  const p99 = lagPercentile(m.round.lag, 99);
  return {
    ...meta,
    status: 'measured',
    throughputPerSec: rate.perSec,
    ...(p50 === undefined ? {} : { p50Ms: p50 }),
    ...(p99 === undefined ? {} : { p99Ms: p99 }),
    completed: m.published * m.plan.subscribers,
    accepted: m.round.updates,
    errors: errorsOf(m),
    durationSec: (rate.basis === 'stamped' ? m.round.measuredSpanMs : m.round.receivedSpanMs) / 1000,
    note: [...details, `lag max ${m.round.lag.maxMs.toFixed(1)} ms`].join('; '),
  };
}

export function toPoint(system: string, fraction: number, m: Measurement, sizes: FanoutSizes): LatencyPoint {
  const target = m.plan.runsPerSec * UPDATES_PER_RUN * m.plan.subscribers;
  const achieved = deliveriesPerSec(m);
  const details = describe(m, sizes).slice(1);
  if (achieved?.basis === 'received') details.unshift(RECEIVED_BASIS_NOTE);
  const note = details.join('; ');
  if (achieved === undefined) return { system, fractionOfPeak: fraction, targetRatePerSec: target, status: 'failed', note: `no measured deliveries: ${note}` };
  const percent = (p: number): number | undefined => lagPercentile(m.round.lag, p);
  return {
    system,
    fractionOfPeak: fraction,
    targetRatePerSec: target,
    status: 'measured',
    achievedRatePerSec: achieved.perSec,
    ...optional('p50Ms', percent(50)),
    ...optional('p90Ms', percent(90)),
    ...optional('p99Ms', percent(99)),
    maxMs: m.round.lag.maxMs,
    completed: m.published * m.plan.subscribers,
    errors: errorsOf(m),
    note,
  };
}

function optional<K extends string>(key: K, value: number | undefined): Partial<Record<K, number>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, number>);
}
