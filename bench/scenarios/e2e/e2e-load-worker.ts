// Child process, the e2e load: closed loop of signed webhooks (fresh timestamp, unique id) over
// keep-alive sockets; each run is timed from its request to the completion notice of its event.
//
// Usage: node --import tsx e2e-load-worker.ts '<E2eLoadSpec JSON>'; prints one E2eLoadResult line.

import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { QueueEvents } from 'bullmq';
import { summarizeLatencies } from '../../harness/stats.ts';
import { buildEventPayload, decodeSigningSecret, signStandardWebhook } from '../../load/signed-requests.ts';
import { startCpuWindow } from '../runs/bench-cpu.ts';
import { watchLive } from '../runs/live-watcher.ts';
import { BULLMQ_QUEUE, type E2eLoadResult, type E2eLoadSpec } from './e2e-protocol.ts';

const spec = JSON.parse(process.argv[2] ?? '{}') as E2eLoadSpec;
const key = decodeSigningSecret(spec.secret);
const agent = new Agent({ keepAlive: true, maxSockets: spec.concurrency });

/** Completion notices by event key: a waiter, or the arrival time when the notice came first. */
const waiting = new Map<string, (atMs: number) => void>();
const early = new Map<string, number>();
function noticed(eventKey: string, atMs: number): void {
  const resolve = waiting.get(eventKey);
  if (resolve === undefined) early.set(eventKey, atMs);
  else {
    waiting.delete(eventKey);
    resolve(atMs);
  }
}
function completion(eventKey: string): Promise<number> {
  const at = early.get(eventKey);
  if (at !== undefined) {
    early.delete(eventKey);
    return Promise.resolve(at);
  }
  return new Promise((resolve) => waiting.set(eventKey, resolve));
}

/** Sends one signed webhook; resolves with the status and the key the system names the event by. */
function send(id: string): Promise<{ status: number; eventKey: string }> {
  const body = buildEventPayload(id, spec.payloadBytes);
  const timestamp = String(Math.floor(Date.now() / 1000));
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: '127.0.0.1',
        port: spec.port,
        path: spec.path,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'webhook-id': id,
          'webhook-timestamp': timestamp,
          'webhook-signature': signStandardWebhook(key, id, timestamp, body),
        },
      },
      (res) => {
        res.resume();
        res.once('end', () => resolve({ status: res.statusCode ?? 0, eventKey: String(res.headers['sluice-event-id'] ?? '') }));
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

let errors = 0;
let accepted = 0;
let firstError: string | undefined;

async function loop(prefix: string, count: number, latencies: Float64Array | undefined): Promise<void> {
  let next = 0;
  const caller = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      const started = performance.now();
      try {
        const { status, eventKey } = await send(`${spec.idPrefix}_${prefix}_${i}`);
        if (status !== 204 || eventKey === '') throw new Error(`ingest answered ${status}`);
        if (latencies !== undefined) accepted += 1;
        const done = await completion(eventKey);
        if (latencies !== undefined) latencies[i] = done - started;
      } catch (error) {
        if (latencies !== undefined) {
          errors += 1;
          latencies[i] = Number.NaN;
        }
        firstError ??= error instanceof Error ? error.message : String(error);
      }
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, caller));
}

const bound = setTimeout(() => {
  process.stderr.write(`e2e load: not done within ${spec.timeoutMs} ms (${waiting.size} runs waiting for their notice)\n`);
  process.exit(1);
}, spec.timeoutMs);

let close: () => Promise<void>;
if (spec.notice.kind === 'live-room') {
  const watcher = await watchLive(`http://127.0.0.1:${spec.port}`, spec.notice.orgId, spec.notice.apiKey);
  watcher.onCompleted = (_runId, atMs, eventId) => noticed(eventId, atMs);
  close = () => Promise.resolve(watcher.close());
} else {
  const events = new QueueEvents(BULLMQ_QUEUE, { connection: { host: '127.0.0.1', port: spec.notice.redisPort } });
  await events.waitUntilReady();
  events.on('completed', ({ jobId }) => noticed(jobId, performance.now()));
  close = () => events.close();
}

await loop('warmup', spec.warmup, undefined);
const latencies = new Float64Array(spec.count);
const cpu = startCpuWindow();
const started = performance.now();
await loop('measured', spec.count, latencies);
const durationSec = (performance.now() - started) / 1000;
const loadCpuCores = cpu();
await close();
agent.destroy();
clearTimeout(bound);

const ok = latencies.filter((v) => !Number.isNaN(v));
const summary = summarizeLatencies(ok, ok.length);
const result: E2eLoadResult = {
  completed: ok.length,
  accepted,
  errors,
  ...(firstError === undefined ? {} : { firstError }),
  durationSec,
  throughputPerSec: ok.length / durationSec,
  ...(summary === undefined ? {} : { p50Ms: summary.p50Ms, p99Ms: summary.p99Ms }),
  loadCpuCores,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
