// Scenario fan-out: run updates of one org delivered live to 1,000 and 10,000 WebSocket subscribers;
// Sluice's live room (uWS topics) against a `ws` server broadcasting the same frames at the same rate.

import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { failedResult, judge, measuredRow, scenarioStatus, type SystemMeta } from '../../result-helpers.ts';
import type { LatencyPoint, PeerRatio, Scenario, ScenarioContext, ScenarioReport, SystemResult } from '../../scenario.ts';
import { startSluice } from '../runs/sluice-runtime.ts';
import { measureRound, toPoint, toRow, type FanoutSystem } from './fanout-round.ts';
import { fanoutSizes, TARGET_DELIVERIES_PER_SEC, TARGET_SUBSCRIBERS, UPDATES_PER_RUN, type FanoutSize, type FanoutSizes } from './fanout-sizes.ts';
import { ensureOpenFiles, OPEN_FILES_HEADROOM } from './open-files.ts';
import { createPeerSystem } from './peer-source.ts';
import { createSluiceSystem } from './sluice-source.ts';
import { startSubscriberPool, type SubscriberPool } from './subscriber-pool.ts';

export const fanoutScenario: Scenario = {
  name: 'fan-out',
  title: 'Live fan-out: run updates to many WebSocket subscribers',
  run: runFanout,
};

/** Full protobufjs decode of one frame in this many, to check the wire scan. Prime, so no pattern hides. */
const CHECK_EVERY = 1009;
const CONNECT_CONCURRENCY = 64;
/** Sluice runs in flight per org: far above what a 5 ms delay at these rates needs. */
const MAX_CONCURRENT_RUNS = 256;

type Kind = 'sluice' | 'ws';

const META: Record<Kind, (size: FanoutSize) => SystemMeta> = {
  sluice: (size) => ({
    system: `sluice-${size.subscribers}`,
    label: `Sluice live room, ${size.subscribers.toLocaleString('en-US')} subscribers`,
    role: 'subject',
    work: 'POST /events -> run with one delay step; each transition (queued, delaying, completed) flushed to LMDB, then published once to the org\'s uWS topic; every subscriber gets the protobuf RunUpdate frame',
  }),
  ws: (size) => ({
    system: `ws-${size.subscribers}`,
    label: `ws broadcast, ${size.subscribers.toLocaleString('en-US')} subscribers`,
    role: 'peer',
    work: 'a driver socket sends the same three RunUpdate frames per run to a `ws` server (peers/ws-broadcast.ts), which sends each one to every subscriber; nothing stored',
  }),
};

interface Collected {
  readonly systems: SystemResult[];
  readonly curve: LatencyPoint[];
  readonly notes: string[];
}

async function runFanout(context: ScenarioContext): Promise<ScenarioReport> {
  const sizes = fanoutSizes(context.quick, availableParallelism());
  const limit = ensureOpenFiles(largestSize(sizes).subscribers + OPEN_FILES_HEADROOM);
  const out: Collected = { systems: [], curve: [], notes: [limit.note] };
  const failAll = (error: unknown): ScenarioReport => {
    for (const kind of ['sluice', 'ws'] as const) out.systems.push(...sizes.sizes.map((size) => failedResult(META[kind](size), error)));
    return report(context, sizes, out);
  };
  if (!limit.sufficient) return failAll(new Error(limit.note));
  let pool: SubscriberPool;
  try {
    pool = await startSubscriberPool(context, sizes.workers, { connectConcurrency: CONNECT_CONCURRENCY, checkEvery: CHECK_EVERY });
  } catch (error) {
    return failAll(error);
  }
  try {
    await measureKind(context, sizes, pool, out, 'sluice', async () => {
      // One org holds every subscriber (and a round's sockets may still be closing when the next
      // opens): past the default per-org share of --websockets, which bounds them all. That total is
      // given too: its default, three quarters of the open-file limit less 64, comes to less than
      // the largest size when the limit was raised to just what the subscribers need (10,256).
      const websockets = String(2 * largestSize(sizes).subscribers);
      const runtime = await startSluice(context, { label: 'sluice serve (fan-out)', args: ['--live-sockets-per-org', '1000000', '--websockets', websockets] });
      return { system: createSluiceSystem(runtime, sizes.delayMs, MAX_CONCURRENT_RUNS), stop: () => runtime.stop() };
    });
    await measureKind(context, sizes, pool, out, 'ws', async () => {
      const peer = await context.children.startServer({
        name: 'ws broadcast peer',
        command: process.execPath,
        args: ['--import', 'tsx', join(context.repoRoot, 'bench', 'peers', 'ws-broadcast.ts'), '--port', '0'],
        cwd: context.repoRoot,
        timeoutMs: 30_000,
      });
      return { system: createPeerSystem(peer.baseUrl, sizes.delayMs), stop: () => peer.stop() };
    });
  } finally {
    await pool.stop();
  }
  return report(context, sizes, out);
}

/** Every size for one system, then its lag curve at the largest size; a failure costs only its own row. */
async function measureKind(context: ScenarioContext, sizes: FanoutSizes, pool: SubscriberPool, out: Collected, kind: Kind, start: () => Promise<{ system: FanoutSystem; stop: () => Promise<void> }>): Promise<void> {
  let started: { system: FanoutSystem; stop: () => Promise<void> };
  try {
    started = await start();
  } catch (error) {
    out.systems.push(...sizes.sizes.map((size) => failedResult(META[kind](size), error)));
    return;
  }
  try {
    for (const size of sizes.sizes) {
      const meta = META[kind](size);
      context.log(`fan-out: ${meta.label}`);
      try {
        out.systems.push(toRow(meta, await measureRound(pool, started.system, `acct-fanout-${size.subscribers}`, size, sizes), sizes));
      } catch (error) {
        out.systems.push(failedResult(meta, error));
      }
    }
    await measureCurve(context, sizes, pool, out, kind, started.system);
  } finally {
    await started.stop();
  }
}

async function measureCurve(context: ScenarioContext, sizes: FanoutSizes, pool: SubscriberPool, out: Collected, kind: Kind, system: FanoutSystem): Promise<void> {
  const size = largestSize(sizes);
  const name = META[kind](size).system;
  const own = measuredRow(out.systems, name)?.throughputPerSec;
  // The reference is Sluice's rate at this size (measured first); the offered rate when it has none.
  const reference = measuredRow(out.systems, META.sluice(size).system)?.throughputPerSec ?? size.runsPerSec * UPDATES_PER_RUN * size.subscribers;
  for (const fraction of sizes.curveFractions) {
    const deliveriesPerSec = fraction * reference;
    if (own === undefined || deliveriesPerSec > 0.95 * own) {
      out.curve.push({ system: name, fractionOfPeak: fraction, targetRatePerSec: deliveriesPerSec, status: 'over_capacity', note: own === undefined ? 'no rate of its own was measured' : `above 95 % of its own ${Math.round(own).toLocaleString('en-US')} deliveries/s` });
      continue;
    }
    context.log(`fan-out: ${name} lag at ${Math.round(fraction * 100)} % of Sluice's rate`);
    const plan = { subscribers: size.subscribers, runsPerSec: deliveriesPerSec / UPDATES_PER_RUN / size.subscribers };
    try {
      out.curve.push(toPoint(name, fraction, await measureRound(pool, system, `acct-fanout-${size.subscribers}-at-${Math.round(fraction * 100)}`, plan, sizes), sizes));
    } catch (error) {
      out.curve.push({ system: name, fractionOfPeak: fraction, targetRatePerSec: deliveriesPerSec, status: 'failed', note: failedResult(META[kind](size), error).note ?? '' });
    }
  }
}

function largestSize(sizes: FanoutSizes): FanoutSize {
  return sizes.sizes.reduce((a, b) => (b.subscribers > a.subscribers ? b : a));
}

function report(context: ScenarioContext, sizes: FanoutSizes, out: Collected): ScenarioReport {
  const { systems, notes } = out;
  const ratios: PeerRatio[] = [];
  for (const size of sizes.sizes) {
    const subject = measuredRow(systems, META.sluice(size).system)?.throughputPerSec;
    const peer = measuredRow(systems, META.ws(size).system)?.throughputPerSec;
    if (subject === undefined || peer === undefined) continue;
    ratios.push({ subject: META.sluice(size).system, peer: META.ws(size).system, ratio: subject / peer });
    // The table's ratio column compares with the first subject row only: each size gets its line here.
    notes.push(`at ${size.subscribers.toLocaleString('en-US')} subscribers Sluice delivers ${(subject / peer).toFixed(2)}x what the ws broadcast does`);
  }
  const atTarget = measuredRow(systems, `sluice-${TARGET_SUBSCRIBERS}`);
  const largest = largestSize(sizes).subscribers;
  const count = (n: number): string => n.toLocaleString('en-US');
  return {
    scenario: fanoutScenario.name,
    title: fanoutScenario.title,
    status: scenarioStatus(systems),
    unit: 'deliveries/s',
    method: [
      `subscribers: ${sizes.sizes.map((s) => count(s.subscribers)).join(' and ')} WebSocket clients in one org, spread over ${sizes.workers} worker processes (\`ws\` client, perMessageDeflate off); each counts every frame and reads seq and at_ms from the protobuf wire bytes (scenarios/fanout/frame-scan.ts), 1 frame in ${CHECK_EVERY} is also decoded with protobufjs and compared; per socket the count and the sum of seqs show every update arrived exactly once, and arrivals after a higher seq are counted`,
      `runs: started open loop at a fixed rate per size (${sizes.sizes.map((s) => `${s.runsPerSec}/s at ${count(s.subscribers)}`).join(', ')}), ${sizes.warmupSec} s warm-up + ${sizes.measureSec} s measured, a fresh org (room) per round; ${UPDATES_PER_RUN} updates per run (queued, delaying, completed: a ${sizes.delayMs} ms durable delay step); sending pauses while the slowest subscriber is more than ${sizes.maxBacklogSec} s of offered updates behind, so an overloaded server queues seconds of frames, not gigabytes (and its lag is that backlog)`,
      'deliveries/s = updates stamped after the warm-up, summed over subscribers, / the span from the first to the last of their receipts (a system whose sending paused for the whole window sent no update in it: then the updates received during the window / their span, noted in its row, with no lag); lag = receipt (worker wall clock, sub-ms) - the update\'s at_ms (whole ms; Sluice stamps it before flushing the transition, the peer\'s driver just before sending), in 0.1 ms buckets',
      'peer: ws server in its own process (one send per subscriber per frame); its driver in the bench process sends the same frames (same codec and field lengths) at the same rate and timing; ok/answered = deliveries received / updates x subscribers; errors = deliveries missing or repeated + subscribers without every seq once + frames that did not scan',
      `lag curve: ${count(largest)} subscribers at ${sizes.curveFractions.map((f) => `${Math.round(f * 100)} %`).join(' and ')} of Sluice's deliveries/s there ("of ref peak"), to see lag when the cores are not saturated; a rate above 95 % of a system's own is not offered`,
      `the subscribers and the server share this machine's ${availableParallelism()} cores: worker and server CPU are in each note`,
    ],
    systems,
    ratios,
    latencyCurve: out.curve,
    targets: [
      judge(
        'fanout.deliveries_10k',
        `Sluice >= ${count(TARGET_DELIVERIES_PER_SEC)} live deliveries/s at ${count(TARGET_SUBSCRIBERS)} subscribers${largest >= TARGET_SUBSCRIBERS ? '' : ` (not judged: this run's largest size is ${count(largest)})`}`,
        atTarget?.throughputPerSec,
        (v) => v >= TARGET_DELIVERIES_PER_SEC,
        (v) => `${Math.round(v).toLocaleString('en-US')} deliveries/s (p99 lag ${atTarget?.p99Ms?.toFixed(1) ?? '?'} ms)`,
      ),
    ],
    notes: [...notes, ...(context.quick ? ['quick sizes: the counts are checked, the speed means nothing'] : [])],
  };
}
