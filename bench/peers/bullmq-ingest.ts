// Peer of the e2e and recovery scenarios, what a user might build instead: Fastify verifies a
// Standard Webhook and adds a BullMQ job (job id = webhook-id, so a retry is not a second job); a
// BullMQ worker in the same process POSTs the job to the receiver (signed, Idempotency-Key),
// retrying on failure.
//
// Child process. Usage: node --import tsx bullmq-ingest.ts --port 0 --secret whsec_… --redis-port N
//   --receiver http://127.0.0.1:N/effects --concurrency N [--lock-ms N --stalled-ms N --events-max-len N]
// (the worker's lockDuration and stalledInterval: how soon jobs of a worker that died go back to
// waiting; BullMQ's defaults, 30 s each, when not given; and the length the queue's event stream is
// trimmed to, BullMQ's default 10,000 when not given: a listener further behind loses events)

import { createHmac, randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Queue, Worker, type Job } from 'bullmq';
import Fastify from 'fastify';
import { Webhook } from 'standardwebhooks';
import { BULLMQ_QUEUE } from '../scenarios/e2e/e2e-protocol.ts';
import { announceListening, stopOnSignal } from './peer-process.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    secret: { type: 'string' },
    'redis-port': { type: 'string' },
    receiver: { type: 'string' },
    concurrency: { type: 'string', default: '64' },
    'lock-ms': { type: 'string' },
    'stalled-ms': { type: 'string' },
    'events-max-len': { type: 'string' },
  },
});
if (values.secret === undefined || values['redis-port'] === undefined || values.receiver === undefined) {
  throw new Error('--secret, --redis-port and --receiver are required');
}
const receiver = values.receiver;
const connection = { host: '127.0.0.1', port: Number(values['redis-port']), maxRetriesPerRequest: null };
const webhook = new Webhook(values.secret);
// The outbound signing key, as Sluice signs each webhook step with the workflow's secret.
const outboundKey = randomBytes(32);
const queue = new Queue(BULLMQ_QUEUE, { connection, ...(values['events-max-len'] === undefined ? {} : { streams: { events: { maxLen: Number(values['events-max-len']) } } }) });

interface EffectJob {
  readonly type: string;
  readonly event: unknown;
}

const worker = new Worker<EffectJob>(
  BULLMQ_QUEUE,
  async (job: Job<EffectJob>) => {
    const body = JSON.stringify({ event: job.data.event, job: job.id, step: 'effect' });
    const key = `${job.id ?? ''}:effect`;
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = createHmac('sha256', outboundKey).update(`${key}.${timestamp}.${body}`).digest('base64');
    const response = await fetch(receiver, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'webhook-id': key, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${signature}`, 'idempotency-key': key },
      body,
      signal: AbortSignal.timeout(10_000),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`receiver answered ${response.status}`);
    return { status: response.status, body: text.slice(0, 4096) };
  },
  {
    connection,
    concurrency: Number(values.concurrency),
    ...(values['lock-ms'] === undefined ? {} : { lockDuration: Number(values['lock-ms']) }),
    ...(values['stalled-ms'] === undefined ? {} : { stalledInterval: Number(values['stalled-ms']) }),
  },
);

const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 });
app.removeContentTypeParser('application/json');
app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => done(null, body));

app.post<{ Params: { org: string; source: string }; Body: string }>('/hooks/:org/:source', async (request, reply) => {
  let event: unknown;
  try {
    event = webhook.verify(request.body, request.headers as Record<string, string>);
  } catch {
    return reply.code(401).send({ error: { code: 'invalid_signature', message: 'The webhook signature is invalid.' } });
  }
  const type = typeof event === 'object' && event !== null && 'type' in event ? event.type : undefined;
  if (typeof type !== 'string') return reply.code(400).send({ error: { code: 'missing_event_type', message: 'The payload has no "type".' } });
  const jobId = String(request.headers['webhook-id']);
  // Resolves after Redis answered, which with appendfsync always is after the AOF fsync.
  await queue.add('effect', { type, event }, { jobId, attempts: 6, backoff: { type: 'exponential', delay: 200 } });
  return reply.code(204).header('sluice-event-id', jobId).send();
});

const address = await app.listen({ host: '127.0.0.1', port: Number(values.port) });
announceListening(Number(new URL(address).port));
stopOnSignal(async () => {
  await app.close();
  await worker.close();
  await queue.close();
});
