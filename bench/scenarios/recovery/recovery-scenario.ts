// Scenario recovery: N runs wait on a webhook step whose receiver holds its answers; the runtime is
// SIGKILLed, restarted on the same data dir, and the bench measures how long until every run
// completed. Peer: the same jobs in BullMQ on Redis, its app process killed and started again
// (recovery-bullmq.ts).

import { performance } from 'node:perf_hooks';
import { percentileOfSorted } from '../../harness/stats.ts';
import { until } from '../../harness/until.ts';
import { failedResult, judge, measuredRow, scenarioStatus, subjectToPeerRatios, type SystemMeta } from '../../result-helpers.ts';
import type { Scenario, ScenarioContext, ScenarioReport, SystemResult, TargetCheck } from '../../scenario.ts';
import { ensureRedis, redisVersion } from '../e2e/redis-install.ts';
import { startEffectReceiver } from '../runs/effect-receiver.ts';
import { watchLive, type LiveWatcher } from '../runs/live-watcher.ts';
import { countRuns, createOrg, createWebhookWorkflow, postEvents } from '../runs/runtime-api.ts';
import { startSluice, type SluiceRuntime } from '../runs/sluice-runtime.ts';
import { DEFAULT_WEBHOOK_CONNECTIONS } from '../../../runtime/runs/outbound-connections.ts';
import { BULLMQ_RECOVERY, measureBullmqRecovery, type RecoveryMeasured } from './recovery-bullmq.ts';
import { recoverySizes, TARGET_RUNS, TARGET_SECONDS, type RecoverySizes } from './recovery-sizes.ts';

export const recoveryScenario: Scenario = {
  name: 'recovery',
  title: 'Recovery after kill -9: N runs in flight, restart on the same data dir, all completed',
  run: runRecovery,
};

const META: SystemMeta = {
  system: 'sluice',
  label: 'Sluice (sluice serve), kill -9 + restart',
  role: 'subject',
  work: 'one-step webhook runs held in flight by the receiver; SIGKILL; restart on the same data dir; every run reclaimed (higher fence, same key), re-sent, answered 200, completed',
};

interface Org {
  readonly id: string;
  readonly key: string;
}

interface Measured extends RecoveryMeasured {
  /** From the listening line to the last completion. */
  readonly listeningToLastMs: number;
  /** CPU the bench process (receiver + subscribers) used from the restart to the last completion, in cores. */
  readonly benchCpuShare: number;
}

async function runRecovery(context: ScenarioContext): Promise<ScenarioReport> {
  const sizes = recoverySizes(context.quick);
  const runs = sizes.orgs * sizes.runsPerOrg;
  const systems: SystemResult[] = [];
  const notes: string[] = [];
  let measured: Measured | undefined;
  try {
    measured = await measure(context, sizes);
    systems.push(toSystem(META, measured));
    notes.push(...describe(measured));
  } catch (error) {
    systems.push(failedResult(META, error));
  }
  const redis = ensureRedis(context.installMissing, context.log);
  if (redis.available) {
    try {
      const peer = await measureBullmqRecovery(context, sizes, heldAtReceiver(sizes));
      systems.push(toSystem(BULLMQ_RECOVERY, peer));
      notes.push(...describePeer(peer, sizes, `${redisVersion()} (${redis.note})`));
    } catch (error) {
      systems.push(failedResult(BULLMQ_RECOVERY, error));
    }
  } else systems.push(failedResult(BULLMQ_RECOVERY, `not run: ${redis.note}`));
  return {
    scenario: recoveryScenario.name,
    title: recoveryScenario.title,
    status: measuredRow(systems, META.system) === undefined ? 'failed' : scenarioStatus(systems),
    unit: 'runs/s',
    method: [
      `${runs} runs in flight: ${sizes.orgs} org(s) x ${sizes.runsPerOrg} runs (max_concurrent_runs = ${sizes.runsPerOrg}), one event each through POST /events (${sizes.senders} requests in flight); each run's only step is a webhook (timeout 60 s) to a local receiver (in the bench process) that holds every answer`,
      `when every run is \`running\` (GET /runs?state=running) and the receiver holds the requests the connection cap lets through (${DEFAULT_WEBHOOK_CONNECTIONS} per org and receiver, the default; the other runs' requests wait in the runtime's pool): SIGKILL of the runtime's process group, then \`sluice serve\` again on the same data dir; the receiver now answers 200 at once`,
      'completion: a live-room WebSocket per org (Subscribe after_seq 0) receives each run\'s `completed` update; its time is the update\'s at_ms (the runtime\'s wall clock on this machine), since updates made before the socket connected arrive replayed; afterwards the ledger is counted through GET /runs?state=completed',
      `BullMQ peer: the same ${runs} jobs added to its queue, its worker's concurrency = the ${heldAtReceiver(sizes)} requests Sluice has out at the kill (so as many are held by a receiver of its own, the rest waiting in Redis); SIGKILL of the app process, Redis left running; the app started again; completion is each job's \`completed\` event on Redis's event stream, dated by its stream id (Redis's clock); lockDuration ${sizes.bullmqLockMs} ms, stalledInterval ${sizes.bullmqStalledMs} ms${context.quick ? ' (shortened for --quick)' : ' (BullMQ\'s defaults)'}`,
      'runs/s = runs / (restart spawn -> last completed); p50/p99 = each run\'s completion time after the restart spawn (includes process start and opening the store)',
    ],
    systems,
    ratios: subjectToPeerRatios(systems),
    latencyCurve: [],
    targets: targets(measured, runs),
    notes,
  };
}

async function measure(context: ScenarioContext, sizes: RecoverySizes): Promise<Measured> {
  const runs = sizes.orgs * sizes.runsPerOrg;
  const receiver = await startEffectReceiver('hold');
  const watchers: LiveWatcher[] = [];
  let runtime: SluiceRuntime | undefined;
  try {
    runtime = await startSluice(context, { label: 'sluice serve (before kill)' });
    const orgs: Org[] = [];
    for (let i = 0; i < sizes.orgs; i += 1) {
      const id = `acct-recovery-${i}`;
      const key = await createOrg(runtime.baseUrl, runtime.adminToken, id, sizes.runsPerOrg);
      await createWebhookWorkflow(runtime.baseUrl, id, key, receiver.url);
      orgs.push({ id, key });
    }
    context.log(`recovery: filling ${runs} runs in flight`);
    const fillStarted = performance.now();
    const rt = runtime;
    const accepted = await Promise.all(orgs.map((org) => postEvents(rt.baseUrl, org.id, org.key, sizes.runsPerOrg, Math.ceil(sizes.senders / sizes.orgs), 'evt-recovery')));
    const total = accepted.reduce((a, b) => a + b, 0);
    if (total !== runs) throw new Error(`only ${total} of ${runs} events were accepted`);
    const atReceiver = heldAtReceiver(sizes);
    await until(() => receiver.counts().held >= atReceiver, sizes.fillTimeoutMs, () => `requests held by the receiver: ${receiver.counts().held} of ${atReceiver}`);
    let running = 0;
    for (const org of orgs) running += await countRuns(rt.baseUrl, org.id, org.key, 'running');
    if (running !== runs) throw new Error(`only ${running} of ${runs} runs are running before the kill`);
    const fillSec = (performance.now() - fillStarted) / 1000;
    const beforeKill = receiver.counts();
    const heldAtKill = receiver.heldKeys();

    context.log(`recovery: ${runs} runs in flight; kill -9`);
    await runtime.kill();
    receiver.mode = 'answer';
    const restarted = performance.now();
    const restartedWallMs = Date.now();
    const cpuBefore = process.cpuUsage();
    runtime = await startSluice(context, { dataDir: runtime.dataDir, adminToken: runtime.adminToken, label: 'sluice serve (after kill)' });
    const listening = performance.now();
    const after = runtime;
    watchers.push(...(await Promise.all(orgs.map((org) => watchLive(after.baseUrl, org.id, org.key)))));
    try {
      await Promise.all(watchers.map((w) => w.waitForCompleted(sizes.runsPerOrg, sizes.recoverTimeoutMs)));
    } catch (error) {
      // Tell a run that did not finish from a `completed` update that did not arrive.
      const states = await Promise.all(['completed', 'running', 'queued', 'backoff'].map(async (state) => {
        let n = 0;
        for (const org of orgs) n += await countRuns(after.baseUrl, org.id, org.key, state);
        return `${state} ${n}`;
      }));
      throw new Error(`${error instanceof Error ? error.message : String(error)}; the ledger holds ${states.join(', ')}`);
    }
    // Server timestamps: updates that happened before the socket connected arrive replayed, late.
    const times = watchers.flatMap((w) => [...w.completedAtServerMs.values()]);
    const last = Math.max(...times);
    const benchCpu = process.cpuUsage(cpuBefore);
    const benchCpuShare = (benchCpu.user + benchCpu.system) / 1000 / (performance.now() - restarted);
    // Late deliveries after completion would be duplicates: keep listening a little.
    await new Promise((r) => setTimeout(r, sizes.settleMs));
    let completedInLedger = 0;
    for (const org of orgs) completedInLedger += await countRuns(after.baseUrl, org.id, org.key, 'completed');
    return {
      runs,
      fillSec,
      restartToListeningMs: listening - restarted,
      fromRestartMs: Float64Array.from(times, (t) => t - restartedWallMs).sort(),
      listeningToLastMs: last - restartedWallMs - (listening - restarted),
      completedInStore: completedInLedger,
      receiver: receiver.counts(),
      beforeKill,
      excessDeliveries: receiver.excessDeliveries(heldAtKill),
      benchCpuShare,
    };
  } finally {
    for (const w of watchers) w.close();
    await runtime?.stop();
    await receiver.close();
  }
}

/** Requests the receiver holds once every run is running: each org's pool stops at its cap. */
const heldAtReceiver = (sizes: RecoverySizes): number => sizes.orgs * Math.min(sizes.runsPerOrg, DEFAULT_WEBHOOK_CONNECTIONS);

function lostOf(m: RecoveryMeasured): number {
  return m.runs - m.completedInStore;
}

/**
 * Effects beyond what recovery promises: each run's webhook under one key (`<run>:<step>`), sent once,
 * and sent once more only if the receiver held it unanswered at the kill; never again after a 200.
 * Counts keys other than one per run, each key's deliveries beyond that, and deliveries after a 200.
 */
function duplicatesOf(m: RecoveryMeasured): number {
  const r = m.receiver;
  return Math.abs(r.distinctKeys - m.runs) + m.excessDeliveries + r.deliveriesAfterAck;
}

function toSystem(meta: SystemMeta, m: RecoveryMeasured): SystemResult {
  const lastMs = m.fromRestartMs[m.fromRestartMs.length - 1] ?? 0;
  return {
    ...meta,
    status: 'measured',
    throughputPerSec: m.runs / (lastMs / 1000),
    p50Ms: percentileOfSorted(m.fromRestartMs, 50),
    p99Ms: percentileOfSorted(m.fromRestartMs, 99),
    completed: m.runs,
    accepted: m.completedInStore,
    errors: lostOf(m) + duplicatesOf(m),
    durationSec: lastMs / 1000,
  };
}

function describe(m: Measured): string[] {
  const lastMs = m.fromRestartMs[m.fromRestartMs.length - 1] ?? 0;
  const r = m.receiver;
  return [
    `filled ${m.runs} runs in flight in ${m.fillSec.toFixed(2)} s (receiver held ${m.beforeKill.held}, deliveries ${m.beforeKill.deliveries}, distinct keys ${m.beforeKill.distinctKeys})`,
    `restart: spawn -> listening ${Math.round(m.restartToListeningMs)} ms; listening -> last run completed ${Math.round(m.listeningToLastMs)} ms; spawn -> last completed ${Math.round(lastMs)} ms`,
    `receiver: deliveries ${r.deliveries}, distinct keys ${r.distinctKeys}, keys delivered more than once ${r.redeliveredKeys} (expected: every request the receiver held before the kill, sent again after it), deliveries after a 200 had been written ${r.deliveriesAfterAck}`,
    `the bench process (receiver + live subscribers) used ${(m.benchCpuShare * 100).toFixed(0)} % of one core from the restart to the last completion: it is not what limits the recovery when this is well below 100 %`,
    `runs completed (ledger, GET /runs?state=completed) ${m.completedInStore} of ${m.runs}; lost ${lostOf(m)}`,
    `duplicates ${duplicatesOf(m)}: keys other than one per run (${m.receiver.distinctKeys} for ${m.runs} runs), deliveries of a key beyond one, or two for a key held unanswered at the kill (${m.excessDeliveries}; ${m.receiver.deliveries} deliveries in all for ${m.runs} runs + ${m.beforeKill.held} held), and deliveries after a 200 (${m.receiver.deliveriesAfterAck}). Redelivery of an unanswered step after the crash is the promise (same idempotency key, higher fence); the kill comes while no answer has been given, so a delivery after a 200 would be a bug.`,
  ];
}

function describePeer(m: RecoveryMeasured, sizes: RecoverySizes, redis: string): string[] {
  const lastMs = m.fromRestartMs[m.fromRestartMs.length - 1] ?? 0;
  const r = m.receiver;
  return [
    `bullmq: ${redis}; filled ${m.runs} jobs in ${m.fillSec.toFixed(2)} s (its receiver held ${m.beforeKill.held}); restart: spawn -> listening ${Math.round(m.restartToListeningMs)} ms; spawn -> first job completed ${Math.round(m.fromRestartMs[0] ?? 0)} ms, last ${Math.round(lastMs)} ms. The held jobs wait for their locks to expire (lockDuration ${sizes.bullmqLockMs} ms, checked every ${sizes.bullmqStalledMs} ms); the waiting ones go on at once`,
    `bullmq: receiver: deliveries ${r.deliveries}, distinct keys ${r.distinctKeys}, keys delivered more than once ${r.redeliveredKeys}, deliveries after a 200 had been written ${r.deliveriesAfterAck}; jobs completed (Redis) ${m.completedInStore} of ${m.runs}; lost ${lostOf(m)}; duplicates ${duplicatesOf(m)} (counted as for Sluice)`,
  ];
}

function targets(m: Measured | undefined, runs: number): TargetCheck[] {
  const lastSec = m === undefined ? undefined : (m.fromRestartMs[m.fromRestartMs.length - 1] ?? 0) / 1000;
  return [
    judge(
      'recovery.time',
      `recovery of ${TARGET_RUNS.toLocaleString('en-US')} runs <= ${TARGET_SECONDS} s (restart spawn -> last run completed${runs === TARGET_RUNS ? '' : `; not judged at ${runs} runs`})`,
      runs === TARGET_RUNS ? lastSec : undefined,
      (v) => v <= TARGET_SECONDS,
      (v) => `${v.toFixed(2)} s`,
    ),
    judge('recovery.lost', 'no run lost (every run completed in the ledger)', m === undefined ? undefined : lostOf(m), (v) => v === 0, (v) => `${v} lost`),
    judge(
      'recovery.duplicates',
      'no duplicate effect: one key per run, each sent once (twice if held unanswered at the kill), none after a 200',
      m === undefined ? undefined : duplicatesOf(m),
      (v) => v === 0,
      (v) => `${v} duplicate keys or deliveries`,
    ),
  ];
}
