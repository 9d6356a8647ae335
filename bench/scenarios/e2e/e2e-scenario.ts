// Scenario e2e: signed webhook -> durable run with one webhook step to a local receiver -> completion
// notice received by a subscriber; Sluice (live room, protobuf) against Fastify + BullMQ on Redis.

import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createSigningSecret, EVENT_TYPE } from '../../load/signed-requests.ts';
import { failedResult, judge, measuredRow, scenarioStatus, subjectToPeerRatios, type SystemMeta } from '../../result-helpers.ts';
import type { Scenario, ScenarioContext, ScenarioReport, SystemResult } from '../../scenario.ts';
import { describeCpu, startCpuWindow } from '../runs/bench-cpu.ts';
import { startEffectReceiver, type EffectReceiver } from '../runs/effect-receiver.ts';
import { createOrg, createSource, createWebhookWorkflow } from '../runs/runtime-api.ts';
import { startPeerServer } from '../runs/peer-server.ts';
import { startSluice } from '../runs/sluice-runtime.ts';
import type { E2eLoadResult, E2eLoadSpec } from './e2e-protocol.ts';
import { e2eSizes, type E2eSizes } from './e2e-sizes.ts';
import { ensureRedis, redisVersion } from './redis-install.ts';
import { DEFAULT_WEBHOOK_CONNECTIONS } from '../../../runtime/runs/outbound-connections.ts';

export const e2eScenario: Scenario = {
  name: 'e2e',
  title: 'End to end: signed webhook -> run with one webhook step -> completion notice received',
  run: runE2e,
};

const ORG = 'acct-e2e';

const SLUICE: SystemMeta = {
  system: 'sluice',
  label: 'Sluice (sluice serve)',
  role: 'subject',
  work: `verify + dedup + event + run in one flushed LMDB txn, 204; the run posts the signed webhook step (Idempotency-Key) to the receiver over at most ${DEFAULT_WEBHOOK_CONNECTIONS} keep-alive connections (the default cap per org and receiver), every transition flushed; \`completed\` RunUpdate (protobuf) on the org's live room`,
};
const BULLMQ: SystemMeta = {
  system: 'bullmq',
  label: 'Fastify + BullMQ on Redis (AOF, fsync always)',
  role: 'peer',
  work: 'Fastify verifies (standardwebhooks), Queue.add with jobId = webhook-id, 204; a Worker in the same process posts the signed webhook (Idempotency-Key) to the receiver with fetch (undici\'s default dispatcher: no connection cap); `completed` via QueueEvents (Redis stream)',
};

async function runE2e(context: ScenarioContext): Promise<ScenarioReport> {
  const sizes = e2eSizes(context.quick);
  const secret = createSigningSecret();
  const receiver = await startEffectReceiver('answer');
  const systems: SystemResult[] = [];
  const notes: string[] = [];
  try {
    const measure = async (meta: SystemMeta, run: () => Promise<E2eLoadResult>): Promise<void> => {
      try {
        context.log(`e2e: ${meta.label}`);
        const cpu = startCpuWindow();
        const before = receiver.counts();
        const load = await run();
        const after = receiver.counts();
        // Each system's runs have keys of their own: what the receiver counted meanwhile is this system's.
        const repeated = after.deliveriesAfterAck - before.deliveriesAfterAck;
        notes.push(`${meta.system}: load worker used ${(load.loadCpuCores * 100).toFixed(0)} % of one core; ${describeCpu('receiver', cpu())}`);
        notes.push(`${meta.system}: the receiver got ${after.deliveries - before.deliveries} deliveries, ${after.distinctKeys - before.distinctKeys} distinct idempotency keys, ${repeated} delivered again after a 200`);
        systems.push(toSystem(meta, load, repeated));
      } catch (error) {
        systems.push(failedResult(meta, error));
      }
    };
    await measure(SLUICE, () => runSluice(context, sizes, secret, receiver, notes));
    const redis = ensureRedis(context.installMissing, context.log);
    if (redis.available) {
      notes.push(`BullMQ peer: ${redisVersion()} (${redis.note})`);
      await measure(BULLMQ, () => runBullmq(context, sizes, secret, receiver));
    } else systems.push(failedResult(BULLMQ, `not run: ${redis.note}`));
  } finally {
    await receiver.close();
  }
  const ratios = subjectToPeerRatios(systems);
  const sluice = measuredRow(systems, SLUICE.system)?.throughputPerSec;
  return {
    scenario: e2eScenario.name,
    title: e2eScenario.title,
    status: scenarioStatus(systems),
    unit: 'runs/s',
    method: [
      `closed loop, ${sizes.concurrency} runs in flight, from a load worker process: Standard Webhooks signed ${sizes.payloadBytes} B events (unique id, fresh timestamp) over keep-alive HTTP; ${sizes.warmup} warm-up runs, then ${sizes.count} measured`,
      'latency: from sending the request to receiving the completion notice (Sluice: `completed` RunUpdate on a live-room WebSocket, decoded with runtime/rooms/live-codec.ts; BullMQ: QueueEvents `completed`), both in the load worker',
      `the same work and durability: both verify, deduplicate by the delivery id, store durably before answering 204, and send one signed webhook per run with its idempotency key; Sluice max_concurrent_runs = BullMQ worker concurrency = ${sizes.concurrency}`,
      'the receiver (bench process) answers 200 at once; each system in its own process, Redis in its own, on a fresh data dir',
    ],
    systems,
    ratios,
    latencyCurve: [],
    targets: [
      judge('e2e.throughput', 'Sluice >= 5,000 runs/s end to end', sluice, (v) => v >= 5000, (v) => `${Math.round(v)} runs/s`),
      judge('e2e.vs_bullmq', 'Sluice >= 3x Fastify + BullMQ', ratios.find((r) => r.peer === BULLMQ.system)?.ratio, (v) => v >= 3, (v) => `${v.toFixed(2)}x`),
    ],
    notes,
  };
}

/** The row of a system whose runs ended as `load` says, `repeated` of its webhooks delivered again after a 200 (each an error). */
function toSystem(meta: SystemMeta, load: E2eLoadResult, repeated: number): SystemResult {
  const problems = [...(load.firstError === undefined ? [] : [`first error: ${load.firstError.slice(0, 200)}`]), ...(repeated === 0 ? [] : [`${repeated} webhooks delivered again after a 200`])];
  return {
    ...meta,
    status: 'measured',
    throughputPerSec: load.throughputPerSec,
    completed: load.completed + load.errors + repeated,
    accepted: load.completed,
    errors: load.errors + repeated,
    durationSec: load.durationSec,
    ...(load.p50Ms === undefined ? {} : { p50Ms: load.p50Ms }),
    ...(load.p99Ms === undefined ? {} : { p99Ms: load.p99Ms }),
    ...(problems.length === 0 ? {} : { note: problems.join('; ') }),
  };
}

function runLoad(context: ScenarioContext, spec: E2eLoadSpec): Promise<E2eLoadResult> {
  return context.children.runJson({
    name: 'e2e load worker',
    command: process.execPath,
    args: ['--import', 'tsx', join(context.repoRoot, 'bench', 'scenarios', 'e2e', 'e2e-load-worker.ts'), JSON.stringify(spec)],
    cwd: context.repoRoot,
    timeoutMs: spec.timeoutMs + 30_000,
  }) as Promise<E2eLoadResult>;
}

async function runSluice(context: ScenarioContext, sizes: E2eSizes, secret: string, receiver: EffectReceiver, notes: string[]): Promise<E2eLoadResult> {
  const runtime = await startSluice(context, { label: 'sluice serve (e2e)' });
  try {
    const apiKey = await createOrg(runtime.baseUrl, runtime.adminToken, ORG, sizes.concurrency);
    const path = await createSource(runtime.baseUrl, ORG, apiKey, 'bench-source', secret);
    await createWebhookWorkflow(runtime.baseUrl, ORG, apiKey, receiver.url, 10_000, EVENT_TYPE);
    const cpuBefore = runtime.cpuSeconds();
    const started = performance.now();
    const load = await runLoad(context, baseSpec(sizes, runtime.port, path, secret, 'sluice', { kind: 'live-room', orgId: ORG, apiKey }));
    const cpuAfter = runtime.cpuSeconds();
    if (cpuBefore !== undefined && cpuAfter !== undefined) {
      const cores = (cpuAfter - cpuBefore) / ((performance.now() - started) / 1000);
      notes.push(`sluice: the runtime process used ${(cores * 100).toFixed(0)} % of one core during the load (warm-up and worker start included)`);
    }
    return load;
  } finally {
    await runtime.stop();
  }
}

async function runBullmq(context: ScenarioContext, sizes: E2eSizes, secret: string, receiver: EffectReceiver): Promise<E2eLoadResult> {
  const redis = await startPeerServer(context, 'redis-server', 'redis-server.ts', ['--data-dir', context.tempDirs.make('redis')]);
  try {
    const ingest = await startPeerServer(context, 'bullmq-ingest', 'bullmq-ingest.ts', [
      '--port', '0', '--secret', secret, '--redis-port', String(redis.port), '--receiver', receiver.url, '--concurrency', String(sizes.concurrency),
    ]);
    try {
      return await runLoad(context, baseSpec(sizes, ingest.port, `/hooks/${ORG}/bench-source`, secret, 'bullmq', { kind: 'bullmq', redisPort: redis.port }));
    } finally {
      await ingest.stop();
    }
  } finally {
    await redis.stop();
  }
}

function baseSpec(sizes: E2eSizes, port: number, path: string, secret: string, idPrefix: string, notice: E2eLoadSpec['notice']): E2eLoadSpec {
  return { port, path, secret, payloadBytes: sizes.payloadBytes, idPrefix, warmup: sizes.warmup, count: sizes.count, concurrency: sizes.concurrency, timeoutMs: sizes.timeoutMs, notice };
}
