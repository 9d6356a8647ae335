// The recovery scenario's peer, what a user might build instead: the e2e scenario's Fastify + BullMQ
// process (bench/peers/bullmq-ingest.ts) with as many jobs as Sluice has runs, as many of them out at
// the receiver as Sluice's connection cap lets out; SIGKILL of that process (Redis, a server of its
// own, stays up, as it would in production), the same process started again, and every job's
// `completed` event read from Redis's event stream.

import { performance } from 'node:perf_hooks';
import { Queue, QueueEvents } from 'bullmq';
import { createSigningSecret, EVENT_TYPE } from '../../load/signed-requests.ts';
import type { SystemMeta } from '../../result-helpers.ts';
import type { ScenarioContext } from '../../scenario.ts';
import type { ServerChild } from '../../harness/children.ts';
import { until } from '../../harness/until.ts';
import { BULLMQ_QUEUE } from '../e2e/e2e-protocol.ts';
import { startPeerServer } from '../runs/peer-server.ts';
import { startEffectReceiver, type EffectReceiver, type ReceiverCounts } from '../runs/effect-receiver.ts';
import type { RecoverySizes } from './recovery-sizes.ts';

export const BULLMQ_RECOVERY: SystemMeta = {
  system: 'bullmq',
  label: 'Fastify + BullMQ on Redis (AOF, fsync always), kill -9 of the app + restart',
  role: 'peer',
  work: 'the same jobs (one signed webhook each, Idempotency-Key) in Redis, the worker\'s concurrency = the requests Sluice has out at the kill; SIGKILL of the app process (ingest + worker); the app started again; jobs the dead worker held go back to waiting once their locks expire (stalled-job check), and every job completes',
};

/** What a recovery measured, Sluice or its peer: the scenario turns it into a row. */
export interface RecoveryMeasured {
  readonly runs: number;
  readonly fillSec: number;
  readonly restartToListeningMs: number;
  /** Each run's (job's) completion time after the restart spawn, sorted. */
  readonly fromRestartMs: Float64Array;
  /** Runs (jobs) the store says completed once the last one did. */
  readonly completedInStore: number;
  readonly receiver: ReceiverCounts;
  readonly beforeKill: ReceiverCounts;
  /** Deliveries beyond one per key, two for a key held unanswered at the kill (EffectReceiver.excessDeliveries). */
  readonly excessDeliveries: number;
}

/** Runs the peer's recovery: `held` jobs out at the receiver when the app is killed. */
export async function measureBullmqRecovery(context: ScenarioContext, sizes: RecoverySizes, held: number): Promise<RecoveryMeasured> {
  const receiver = await startEffectReceiver('hold');
  try {
    const redis = await startPeerServer(context, 'redis-server', 'redis-server.ts', ['--data-dir', context.tempDirs.make('redis-recovery')]);
    try {
      return await measureOn(context, sizes, held, receiver, redis.port);
    } finally {
      await redis.stop();
    }
  } finally {
    await receiver.close();
  }
}

async function measureOn(context: ScenarioContext, sizes: RecoverySizes, held: number, receiver: EffectReceiver, redisPort: number): Promise<RecoveryMeasured> {
  const runs = sizes.orgs * sizes.runsPerOrg;
  const connection = { host: '127.0.0.1', port: redisPort, maxRetriesPerRequest: null };
  // Each job adds a few events to the stream (added, active, completed, ...): kept whole, so a
  // listener that falls behind loses none (BullMQ trims it to 10,000 by default).
  const eventsMaxLen = String(10 * runs + 10_000);
  const queue = new Queue(BULLMQ_QUEUE, { connection, streams: { events: { maxLen: Number(eventsMaxLen) } } });
  const events = new QueueEvents(BULLMQ_QUEUE, { connection });
  const startApp = (label: string): Promise<ServerChild> =>
    startPeerServer(context, label, 'bullmq-ingest.ts', [
      '--port', '0', '--secret', createSigningSecret(), '--redis-port', String(redisPort), '--receiver', receiver.url,
      '--concurrency', String(held), '--lock-ms', String(sizes.bullmqLockMs), '--stalled-ms', String(sizes.bullmqStalledMs), '--events-max-len', eventsMaxLen,
    ]);
  let app: ServerChild | undefined;
  try {
    await events.waitUntilReady();
    app = await startApp('bullmq-ingest (before kill)');
    context.log(`recovery: BullMQ peer: filling ${runs} jobs`);
    const fillStarted = performance.now();
    for (let first = 0; first < runs; first += 1000) {
      const chunk = Array.from({ length: Math.min(1000, runs - first) }, (_, i) => {
        const jobId = `evt-recovery-bullmq-${first + i}`;
        return { name: 'effect', data: { type: EVENT_TYPE, event: { type: EVENT_TYPE, data: { n: first + i } } }, opts: { jobId, attempts: 6, backoff: { type: 'exponential', delay: 200 } } };
      });
      await queue.addBulk(chunk);
    }
    await until(() => receiver.counts().held >= held, sizes.fillTimeoutMs, () => `requests held by the receiver: ${receiver.counts().held} of ${held}`);
    const counts = await queue.getJobCounts('active', 'waiting', 'completed');
    if (counts.active !== held || counts.waiting !== runs - held || counts.completed !== 0) throw new Error(`before the kill: ${JSON.stringify(counts)}, expected ${held} active and ${runs - held} waiting`);
    const fillSec = (performance.now() - fillStarted) / 1000;
    const beforeKill = receiver.counts();
    const heldAtKill = receiver.heldKeys();

    context.log(`recovery: BullMQ peer: ${held} jobs out, ${runs - held} waiting; kill -9 of the app`);
    await app.kill();
    app = undefined;
    receiver.mode = 'answer';
    // A job's completion is dated by its event's stream id: Redis's clock at the moment it was
    // recorded. A job that fails for good ends too (it counts as lost below).
    const completedAt = new Map<string, number>();
    const failed = new Set<string>();
    let allEnded: () => void = () => undefined;
    const ended = new Promise<void>((resolve) => (allEnded = resolve));
    const check = (): void => void (completedAt.size + [...failed].filter((jobId) => !completedAt.has(jobId)).length >= runs && allEnded());
    events.on('completed', ({ jobId }, id) => {
      if (!completedAt.has(jobId)) completedAt.set(jobId, Number(id.split('-')[0]));
      check();
    });
    events.on('failed', ({ jobId }) => {
      failed.add(jobId);
      check();
    });
    const restarted = performance.now();
    const restartedWallMs = Date.now();
    app = await startApp('bullmq-ingest (after kill)');
    const listening = performance.now();
    let bound: NodeJS.Timeout | undefined;
    const tooLong = new Promise<never>((_, reject) => {
      bound = setTimeout(() => reject(new Error(`${completedAt.size} of ${runs} jobs completed (${failed.size} failed) ${sizes.recoverTimeoutMs} ms after the restart`)), sizes.recoverTimeoutMs);
    });
    await Promise.race([ended, tooLong]).finally(() => clearTimeout(bound));
    await new Promise((r) => setTimeout(r, sizes.settleMs));
    const after = await queue.getJobCounts('completed');
    return {
      runs,
      fillSec,
      restartToListeningMs: listening - restarted,
      fromRestartMs: Float64Array.from(completedAt.values(), (t) => t - restartedWallMs).sort(),
      completedInStore: after.completed ?? 0,
      receiver: receiver.counts(),
      beforeKill,
      excessDeliveries: receiver.excessDeliveries(heldAtKill),
    };
  } finally {
    await Promise.allSettled([app?.stop(), events.close(), queue.close()]);
  }
}

