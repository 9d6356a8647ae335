// Scenario fairness: tenant B's time from event accepted to run completed, alone on a fresh runtime
// and again right after tenant A enqueued a flood of runs on another fresh runtime (same workflow).

import { performance } from 'node:perf_hooks';
import { percentileOfSorted } from '../../harness/stats.ts';
import { failedResult, judge, measuredRow, scenarioStatus, type SystemMeta } from '../../result-helpers.ts';
import type { Scenario, ScenarioContext, ScenarioReport, SystemResult } from '../../scenario.ts';
import { describeCpu, startCpuWindow } from '../runs/bench-cpu.ts';
import { startEffectReceiver, type EffectReceiver } from '../runs/effect-receiver.ts';
import { watchLive } from '../runs/live-watcher.ts';
import { createOrg, createWebhookWorkflow, postEvent, postEvents } from '../runs/runtime-api.ts';
import { startSluice, type SluiceRuntime } from '../runs/sluice-runtime.ts';
import { fairnessSizes, type FairnessSizes } from './fairness-sizes.ts';

export const fairnessScenario: Scenario = {
  name: 'fairness',
  title: 'Fairness: a quiet tenant\'s time to complete while another tenant floods',
  run: runFairness,
};

/** The runtime's default max_concurrent_runs (README): both tenants keep it. */
const DEFAULT_CONCURRENCY = 4;

const ALONE: SystemMeta = {
  system: 'tenant-b-alone',
  label: 'tenant B alone (fresh runtime)',
  role: 'subject',
  work: 'B sends paced events through POST /events; each makes one run with one webhook step to the local receiver (200 at once); time = 202 received -> `completed` update received on B\'s live room',
};
const FLOODED: SystemMeta = {
  system: 'tenant-b-flooded',
  label: 'tenant B while A\'s backlog runs',
  role: 'subject',
  work: 'the same as B alone, on a fresh runtime where tenant A has just enqueued its flood (same workflow shape, same receiver)',
};
const FLOOD: SystemMeta = {
  system: 'tenant-a-flood',
  label: 'tenant A flood (enqueue)',
  role: 'subject',
  work: 'A\'s events through POST /events (202 after the durable write of event + run), as fast as the senders go; throughput = events accepted/s',
};

interface Probe {
  readonly latenciesMs: Float64Array;
  readonly completed: number;
  readonly sent: number;
  readonly accepted: number;
  readonly durationSec: number;
  /** Deliveries the receiver got from A during B's probe window (A's progress meanwhile). */
  readonly otherDeliveries: number;
}

async function runFairness(context: ScenarioContext): Promise<ScenarioReport> {
  const sizes = fairnessSizes(context.quick);
  const systems: SystemResult[] = [];
  const notes: string[] = [];
  const receiver = await startEffectReceiver('answer');
  try {
    try {
      const alone = await measurePhase(context, sizes, receiver, false);
      systems.push(probeResult(ALONE, alone.probe));
    } catch (error) {
      systems.push(failedResult(ALONE, error));
    }
    try {
      const flooded = await measurePhase(context, sizes, receiver, true);
      systems.push(probeResult(FLOODED, flooded.probe));
      if (flooded.flood !== undefined) systems.push(flooded.flood);
      notes.push(`while B's ${flooded.probe.sent} events ran (${flooded.probe.durationSec.toFixed(2)} s), the receiver got ${flooded.probe.otherDeliveries} deliveries of A's runs: A's backlog kept running`);
    } catch (error) {
      systems.push(failedResult(FLOODED, error));
    }
  } finally {
    await receiver.close();
  }
  const p99 = (name: string): number | undefined => measuredRow(systems, name)?.p99Ms;
  const alone = p99(ALONE.system);
  const flooded = p99(FLOODED.system);
  return {
    scenario: fairnessScenario.name,
    title: fairnessScenario.title,
    status: scenarioStatus(systems),
    unit: 'runs/s',
    method: [
      `tenant A: ${sizes.floodRuns.toLocaleString('en-US')} events through POST /events (${sizes.floodSenders} in flight), all accepted before B starts; both tenants keep the default max_concurrent_runs (${DEFAULT_CONCURRENCY})`,
      `tenant B: ${sizes.probeEvents} events, one every ${sizes.probeIntervalMs} ms (open loop, the same in both phases), each timed from its 202 to its run's \`completed\` update on a live-room WebSocket connected beforehand`,
      'each phase on a fresh runtime and data dir; one workflow per tenant: one webhook step to a local receiver (in the bench process) answering 200',
    ],
    systems,
    ratios: [],
    latencyCurve: [],
    targets: [
      judge('fairness.p99_ratio', 'B\'s p99 under A\'s flood within 2x of B alone', alone === undefined || flooded === undefined ? undefined : flooded / alone, (v) => v <= 2, (v) => `${v.toFixed(2)}x (${flooded?.toFixed(1) ?? '?'} ms vs ${alone?.toFixed(1) ?? '?'} ms)`),
    ],
    notes,
  };
}

async function measurePhase(context: ScenarioContext, sizes: FairnessSizes, receiver: EffectReceiver, flood: boolean): Promise<{ probe: Probe; flood?: SystemResult }> {
  let runtime: SluiceRuntime | undefined;
  try {
    runtime = await startSluice(context, { label: flood ? 'sluice serve (fairness, flooded)' : 'sluice serve (fairness, B alone)' });
    const rt = runtime;
    const bKey = await createOrg(rt.baseUrl, rt.adminToken, 'acct-tenant-b', DEFAULT_CONCURRENCY);
    await createWebhookWorkflow(rt.baseUrl, 'acct-tenant-b', bKey, receiver.url, 10_000);
    let floodResult: SystemResult | undefined;
    if (flood) {
      const aKey = await createOrg(rt.baseUrl, rt.adminToken, 'acct-tenant-a', DEFAULT_CONCURRENCY);
      await createWebhookWorkflow(rt.baseUrl, 'acct-tenant-a', aKey, receiver.url, 10_000);
      context.log(`fairness: tenant A enqueues ${sizes.floodRuns} runs`);
      const started = performance.now();
      const cpu = startCpuWindow();
      const accepted = await withTimeout(postEvents(rt.baseUrl, 'acct-tenant-a', aKey, sizes.floodRuns, sizes.floodSenders, 'evt-a'), sizes.floodTimeoutMs, 'tenant A\'s flood');
      const durationSec = (performance.now() - started) / 1000;
      const note = describeCpu('event senders + receiver', cpu());
      floodResult = { ...FLOOD, status: 'measured', throughputPerSec: accepted / durationSec, completed: sizes.floodRuns, accepted, errors: sizes.floodRuns - accepted, durationSec, note };
    }
    context.log(`fairness: tenant B sends ${sizes.probeEvents} events${flood ? ' under A\'s flood' : ' alone'}`);
    const probe = await probeTenantB(rt, bKey, sizes, receiver);
    return floodResult === undefined ? { probe } : { probe, flood: floodResult };
  } finally {
    await runtime?.stop();
  }
}

async function probeTenantB(runtime: SluiceRuntime, bKey: string, sizes: FairnessSizes, receiver: EffectReceiver): Promise<Probe> {
  const watcher = await watchLive(runtime.baseUrl, 'acct-tenant-b', bKey);
  try {
    const acceptedAt = new Map<string, number>();
    const deliveriesBefore = receiver.counts().deliveries;
    const started = performance.now();
    const sends: Promise<void>[] = [];
    for (let i = 0; i < sizes.probeEvents; i += 1) {
      const due = started + i * sizes.probeIntervalMs;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const id = `evt-b-${i}`;
      sends.push(
        postEvent(runtime.baseUrl, 'acct-tenant-b', bKey, id).then((status) => {
          if (status === 202) acceptedAt.set(id, performance.now());
        }),
      );
    }
    await Promise.all(sends);
    await watcher.waitForCompleted(acceptedAt.size, sizes.probeTimeoutMs).catch(() => undefined);
    const durationSec = (performance.now() - started) / 1000;
    const latencies: number[] = [];
    for (const [id, at] of acceptedAt) {
      const done = watcher.completedByEvent.get(id);
      if (done !== undefined) latencies.push(Math.max(0, done - at));
    }
    const bDeliveries = latencies.length;
    return {
      latenciesMs: Float64Array.from(latencies).sort(),
      completed: latencies.length,
      sent: sizes.probeEvents,
      accepted: acceptedAt.size,
      durationSec,
      otherDeliveries: Math.max(0, receiver.counts().deliveries - deliveriesBefore - bDeliveries),
    };
  } finally {
    watcher.close();
  }
}

function probeResult(meta: SystemMeta, probe: Probe): SystemResult {
  if (probe.completed === 0) return { ...meta, status: 'failed', note: `none of B's ${probe.accepted} accepted events completed in time` };
  return {
    ...meta,
    status: 'measured',
    throughputPerSec: probe.completed / probe.durationSec,
    p50Ms: percentileOfSorted(probe.latenciesMs, 50),
    p99Ms: percentileOfSorted(probe.latenciesMs, 99),
    completed: probe.sent,
    accepted: probe.completed,
    errors: probe.sent - probe.completed,
    durationSec: probe.durationSec,
    ...(probe.completed < probe.accepted ? { note: `${probe.accepted - probe.completed} accepted events had not completed within the bound` } : {}),
  };
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
