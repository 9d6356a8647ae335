// How the bench counts what went wrong, on its real parts: the recovery receiver's duplicates per
// key (a key sent twice and another not sent again do not cancel out), the fan-out subscriber
// worker's "every seq once" (a repeat plus a miss is not complete; out of order but whole is), a
// fan-out round whose sending paused for its whole window (measured by what arrived in it, not
// failed), and wrk's answers past its timeout (one error each, not two).

import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, test } from 'node:test';
import { WebSocketServer, type WebSocket } from 'ws';
import { ChildProcesses } from '../../bench/harness/children.ts';
import { parseWrkResult } from '../../bench/load/wrk.ts';
import { startEffectReceiver } from '../../bench/scenarios/runs/effect-receiver.ts';
import { toRow, type Measurement } from '../../bench/scenarios/fanout/fanout-round.ts';
import { fanoutSizes } from '../../bench/scenarios/fanout/fanout-sizes.ts';
import { startSubscriberPool, type SubscriberPool } from '../../bench/scenarios/fanout/subscriber-pool.ts';
import type { ScenarioContext } from '../../bench/scenario.ts';
import { encodeLiveMessage } from '../../runtime/rooms/live-codec.ts';
import { ROOT } from '../helpers/runtime.ts';

const children = new ChildProcesses();
after(() => children.stopAll());

/** POSTs to the receiver with an idempotency key; resolves when the request has been sent (the answer may be held). */
function deliver(url: string, key: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { 'idempotency-key': key, 'content-length': '2' }, agent: false });
    req.on('error', () => undefined); // held requests are cut at close
    req.on('finish', () => resolve());
    req.once('error', reject);
    req.end('{}');
  });
}

test('recovery duplicates are counted per key: two sends before the kill and one after is a duplicate, whatever other keys did', async () => {
  const receiver = await startEffectReceiver('hold');
  try {
    for (const key of ['K', 'K', 'L']) await deliver(receiver.url, key);
    const until = async (n: number): Promise<void> => {
      while (receiver.counts().deliveries < n) await new Promise((resolve) => setImmediate(resolve));
    };
    await until(3);
    const heldAtKill = receiver.heldKeys();
    assert.deepEqual([...heldAtKill].sort(), ['K', 'L']);
    receiver.mode = 'answer';
    // After the "restart": K again (allowed once, as it was held), M once; L is not sent again.
    for (const key of ['K', 'M']) await deliver(receiver.url, key);
    await until(5);
    // Totals say 5 deliveries for 3 keys + 3 held: nothing beyond. Per key, K came 3 times for 2 allowed.
    assert.equal(receiver.excessDeliveries(heldAtKill), 1);
    assert.equal(receiver.excessDeliveries(new Set()), 2, 'without the hold, K has two beyond its first');
  } finally {
    await receiver.close();
  }
});

/** A RunUpdate frame as a live room sends it, stamped `atMs`. */
const frame = (seq: number, atMs = Date.now()): Uint8Array =>
  encodeLiveMessage({ run_update: { run_id: 'run_x', state: 'queued', channel: 'bench', workflow_id: 'wf', event_id: 'evt', step_id: 's', attempt: 0, seq, at_ms: atMs, error: '', environment: 'production' } });

test('the fan-out subscriber worker counts a socket complete only with each seq once: 1,1,4,4,5 is not 1..5; 1,3,2,4,5 is', async () => {
  const room = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise((resolve) => room.once('listening', resolve));
  let connections = 0;
  room.on('connection', (socket) => {
    for (const seq of connections++ === 0 ? [1, 1, 4, 4, 5] : [1, 3, 2, 4, 5]) socket.send(frame(seq));
  });
  try {
    const worker = await children.startServer({
      name: 'subscriber worker',
      command: process.execPath,
      args: ['--import', 'tsx', 'bench/scenarios/fanout/subscriber-worker.ts', JSON.stringify({ connectConcurrency: 1, checkEvery: 1 })],
      cwd: ROOT,
      timeoutMs: 30_000,
    });
    const call = async (path: string): Promise<Record<string, unknown>> => (await fetch(`${worker.baseUrl}${path}`, { method: 'POST' })).json() as Promise<Record<string, unknown>>;
    const roomUrl = `ws://127.0.0.1:${(room.address() as { port: number }).port}/`;
    assert.equal((await call(`/connect?url=${encodeURIComponent(roomUrl)}&count=2`)).connected, 2);
    await call('/start?windowStartMs=0');
    const result = await call('/finish?expected=5&timeoutMs=10000');
    assert.deepEqual([result.sockets, result.updates, result.complete], [2, 10, 1]);
  } finally {
    room.close();
  }
});

test('a fan-out round whose sending paused for its whole window is measured by the updates that arrived in it (its backlog), without lag', async () => {
  const room = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  await new Promise((resolve) => room.once('listening', resolve));
  const sockets: WebSocket[] = [];
  room.on('connection', (socket) => sockets.push(socket));
  const context = { repoRoot: ROOT, children } as unknown as ScenarioContext;
  let pool: SubscriberPool | undefined;
  try {
    pool = await startSubscriberPool(context, 2, { connectConcurrency: 1, checkEvery: 1 });
    await pool.connect(`ws://127.0.0.1:${(room.address() as { port: number }).port}/`, 2);
    // Every update was stamped in the warm-up (before the window) and arrives after it opened.
    const windowStartMs = Date.now();
    await pool.start(windowStartMs);
    for (const socket of sockets) for (let seq = 1; seq <= 6; seq += 1) socket.send(frame(seq, windowStartMs - 1000));
    const round = await pool.finish(6, 10_000);
    assert.deepEqual([round.updates, round.complete, round.measuredUpdates, round.receivedInWindow], [12, 2, 0, 12]);
    assert.ok(round.receivedSpanMs > 0, 'the arrivals span some time');
    const sizes = fanoutSizes(true, 2);
    const paced = { runs: 2, runsInWindow: 0, windowStartMs, sendSec: 1, pauses: 1, pausedSec: 1 };
    const measurement: Measurement = { plan: { subscribers: 2, runsPerSec: 2 }, round, paced, published: 6, remarks: [], serverCpuCores: undefined, benchCpuCores: 0 };
    const row = toRow({ system: 'ws-2', label: 'ws', role: 'peer', work: 'w' }, measurement, sizes);
    assert.equal(row.status, 'measured', row.note);
    assert.equal(row.throughputPerSec, 12 / (round.receivedSpanMs / 1000));
    assert.deepEqual([row.p50Ms, row.p99Ms, row.errors], [undefined, undefined, 0]);
    assert.match(row.note ?? '', /^no update was sent inside the measured window/);
    // Had nothing arrived in the window either, the row fails as before; so it does when runs were
    // started in the window and none of their updates came (lost, not slow).
    const nothing = toRow({ system: 'ws-2', label: 'ws', role: 'peer', work: 'w' }, { ...measurement, round: { ...round, receivedInWindow: 0, receivedSpanMs: 0 } }, sizes);
    assert.equal(nothing.status, 'failed');
    const lost = toRow({ system: 'ws-2', label: 'ws', role: 'peer', work: 'w' }, { ...measurement, paced: { ...paced, runsInWindow: 1 } }, sizes);
    assert.equal(lost.status, 'failed');
  } finally {
    await pool?.stop();
    room.close();
  }
});

test('wrk answers past --timeout are one error each: not completed, timed out', () => {
  const result = parseWrkResult(JSON.stringify({ requests: 100, durationUs: 1e6, errors: { connect: 0, read: 0, write: 0, status: 2, timeout: 3 }, latencyUs: { p50: 1000, p90: 2000, p99: 3000, max: 4000 } }), 104);
  assert.equal(result.completed, 97);
  assert.deepEqual(result.statuses, { '2xx': 95, 'non-2xx': 2 });
  assert.equal(result.timedOut, 4 + 3, 'four never answered, three answered too late');
  // The ingest scenario's errors: completed but not accepted, plus timed out: 2 + 7, each request once.
  assert.equal(result.completed - (result.statuses['2xx'] ?? 0) + result.timedOut, 9);
});
