// What live sockets hold queued, unread, is bounded per org and in all: replays send only into the
// room their org has left, and a sweep closes the largest holders of an org past its share (4008),
// leaving its readers and every other org alone. The accounting on its own, then over real sockets.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { WebSocket } from 'uWebSockets.js';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import { LiveQueue } from '../../runtime/rooms/live-queue.ts';
import type { SocketData } from '../../runtime/rooms/live-socket.ts';
import type { NewRunUpdate } from '../../runtime/rooms/update-log.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { createOrg } from '../helpers/http.ts';
import { connectLive, type LiveClient } from '../helpers/live-client.ts';

/** A socket as the queue sees it: an org, and what uWS holds for it now (`buffered`). */
function socketOf(orgId: string, buffered: number): WebSocket<SocketData> & { buffered: number; name: string } {
  const data = { orgId, queued: 0 } as SocketData;
  const ws = { buffered, name: '', getBufferedAmount: () => ws.buffered, getUserData: () => data };
  return ws as unknown as WebSocket<SocketData> & { buffered: number; name: string };
}

test('the queue counts each socket as of its last look; replays get three quarters of what is left of the org share and of the total', () => {
  const queue = new LiveQueue(4000, 1000);
  assert.equal(queue.replayRoom('a'), 750);
  const a1 = socketOf('a', 300);
  queue.count(a1);
  assert.deepEqual([queue.held, queue.replayRoom('a'), queue.replayRoom('b')], [300, 450, 750]);
  a1.buffered = 100;
  queue.count(a1);
  assert.deepEqual([queue.held, queue.replayRoom('a')], [100, 650], 'counted again, not added');
  queue.forget(a1.getUserData());
  assert.deepEqual([queue.held, queue.replayRoom('a')], [0, 750]);
  const others = ['b', 'c', 'd', 'e'].map((org) => socketOf(org, 700));
  for (const ws of others) queue.count(ws);
  assert.equal(queue.replayRoom('a'), 3000 - 2800, 'the total\'s part left is less than the share\'s');
});

test('past an org\'s share its largest holders are closed until it is within it; other orgs\' sockets, and an org within its share, are left', () => {
  const queue = new LiveQueue(10_000, 1000);
  const sockets = [socketOf('a', 100), socketOf('a', 600), socketOf('a', 450), socketOf('b', 900), socketOf('b', 50)];
  sockets.forEach((ws, i) => (ws.name = `s${i}`));
  for (const ws of sockets) queue.count(ws);
  const closed: string[] = [];
  assert.equal(queue.closeLargestOverShare(sockets, (ws) => closed.push((ws as unknown as { name: string }).name)), 1);
  assert.deepEqual(closed, ['s1'], 'a holds 1,150 of its 1,000: its largest (600) goes; b (950) stays');
  assert.equal(queue.held, 100 + 450 + 900 + 50);
  assert.equal(queue.closeLargestOverShare(sockets.filter((ws) => ws.name !== 's1'), () => assert.fail('nothing is over')), 0);
});

test('past the total the largest holders of any org are closed until all are within it', () => {
  const queue = new LiveQueue(1000, 1000);
  const sockets = [socketOf('a', 400), socketOf('b', 300), socketOf('c', 500)];
  for (const ws of sockets) queue.count(ws);
  const closed: string[] = [];
  queue.closeLargestOverShare(sockets, (ws) => closed.push(ws.getUserData().orgId));
  assert.deepEqual(closed, ['c'], '1,200 of 1,000: the largest (500) goes, and 700 is within');
});

// Over real sockets: a total of 8 MiB, so an org's share is 2 MiB and its replays fill 1.5 MiB.
const TOTAL = 8 * 1024 * 1024;
const SHARE = TOTAL / 4;
const REPLAY_ROOM = (SHARE * 3) / 4;
const UPDATE_BYTES = 16 * 1024;

let rt: TestRuntime;
const keys = new Map<string, string>();
before(async () => {
  rt = await startRuntime({ args: ['--live-retention', '10000'], liveQueueBytes: TOTAL });
  for (const org of ['acct-lq-stalled', 'acct-lq-other', 'acct-lq-topic']) keys.set(org, await createOrg(rt.url, ADMIN_TOKEN, org));
});
after(async () => rt.close());

const update = (runId: string): NewRunUpdate => ({
  run_id: runId, state: 'running', channel: 'orders', workflow_id: 'wf', event_id: 'evt', step_id: 's1', attempt: 1, at_ms: 1, error: 'e'.repeat(UPDATE_BYTES), environment: 'production',
});

/** Appends in one durable transaction, then publishes, as the run engine does. */
async function commit(orgId: string, count: number): Promise<RunUpdate[]> {
  const { ledger, updateLog, rooms } = rt.runtime;
  const stored = await durably(ledger.root, ledger.root.transaction(() => Array.from({ length: count }, (_, i) => updateLog.append(orgId, update(`run-${i}`)))));
  rooms.publish(orgId, stored);
  return stored;
}

const pause = (client: LiveClient): void => (client.socket as unknown as { _socket: { pause(): void } })._socket.pause();
const receivedAll = (client: LiveClient, count: number) => () => client.updates().length >= count;

test('sockets that stop reading in a replay hold at most their org\'s replay room in all; another org\'s replay goes on meanwhile', { timeout: 60_000 }, async () => {
  const { rooms } = rt.runtime;
  const stalledOrg = 'acct-lq-stalled';
  // 2,000 updates of 16 KiB: 32 MB each socket is owed, more than the kernel's buffers take for it.
  for (let i = 0; i < 4; i++) await commit(stalledOrg, 500);
  const stalled: LiveClient[] = [];
  for (let i = 0; i < 12; i++) {
    const client = await connectLive(rt.url, stalledOrg, { query: `?token=${encodeURIComponent(keys.get(stalledOrg)!)}&after_seq=0` });
    pause(client);
    stalled.push(client);
  }
  // Unbounded, each would hold its 256 KiB replay pause: 3 MiB in all.
  let held = 0;
  for (let round = 0; round < 200 && held < REPLAY_ROOM - UPDATE_BYTES; round++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    await rooms.sweepQueue();
    held = rooms.queuedBytes;
  }
  assert.ok(held >= REPLAY_ROOM - UPDATE_BYTES, `the stopped readers filled their org's replay room (${held} bytes)`);
  for (let round = 0; round < 20; round++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    await rooms.sweepQueue();
    // A pump may pass the room by the one frame that reaches it.
    assert.ok(rooms.queuedBytes <= REPLAY_ROOM + UPDATE_BYTES + 1024, `${rooms.queuedBytes} bytes queued, past the room of ${REPLAY_ROOM}`);
  }
  assert.equal(rooms.replayingCount, 12, 'they wait for room, nothing closed');

  const otherOrg = 'acct-lq-other';
  const backlog = await commit(otherOrg, 500);
  const reader = await connectLive(rt.url, otherOrg, { query: `?token=${encodeURIComponent(keys.get(otherOrg)!)}&after_seq=0` });
  await reader.waitFor(receivedAll(reader, backlog.length), 'the other org\'s whole replay', 30_000);
  reader.close();

  // A reader of the stalled org waits while they hold its room, and goes on once they are gone.
  const late = await connectLive(rt.url, stalledOrg, { query: `?token=${encodeURIComponent(keys.get(stalledOrg)!)}&after_seq=0` });
  await rooms.sweepQueue();
  assert.ok(late.updates().length < 100, `the room was spent: it got ${late.updates().length} updates`);
  for (const client of stalled) client.socket.terminate();
  for (let round = 0; round < 3000 && late.updates().length < 2000; round++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    await rooms.sweepQueue();
  }
  assert.equal(late.updates().length, 2000, 'the whole replay');
  late.close();
});

test('a live room\'s sockets that do not read are closed largest first (4008) once their org holds past its share; its reader stays', { timeout: 60_000 }, async () => {
  const { rooms } = rt.runtime;
  const org = 'acct-lq-topic';
  const token = keys.get(org)!;
  const reader = await connectLive(rt.url, org, { token });
  const silent: LiveClient[] = [];
  for (let i = 0; i < 6; i++) {
    const client = await connectLive(rt.url, org, { token });
    pause(client);
    silent.push(client);
  }
  const open = rooms.subscriberCount;
  let published = 0;
  let closedBySweeps = 0;
  // 256 KiB a step to every socket (the kernel takes the first megabytes of each, uWS queues the
  // rest), so none reaches uWS's own 1 MiB limit between two sweeps.
  for (let step = 0; step < 200 && rooms.subscriberCount === open; step++) {
    published += (await commit(org, 16)).length;
    await reader.waitFor(receivedAll(reader, published), 'the reader to keep up', 30_000);
    closedBySweeps += await rooms.sweepQueue();
  }
  assert.ok(closedBySweeps > 0 && rooms.subscriberCount === open - closedBySweeps, `the sweep closed silent sockets (${closedBySweeps}), nothing else did`);
  assert.ok(rooms.queuedBytes <= SHARE, `${rooms.queuedBytes} bytes still queued, past the share of ${SHARE}`);
  published += (await commit(org, 1)).length;
  await reader.waitFor(receivedAll(reader, published), 'the reader to get what comes next');
  assert.equal(reader.socket.readyState, reader.socket.OPEN, 'the reader was not closed');
  // Reading again, the closed ones get their backlog and then the close frame.
  const codes: number[] = [];
  for (const client of silent) {
    void client.closed.then(({ code }) => codes.push(code));
    (client.socket as unknown as { _socket: { resume(): void } })._socket.resume();
  }
  await reader.waitFor(() => codes.length >= closedBySweeps, 'the closed sockets\' close frames', 30_000);
  assert.deepEqual(codes.slice(0, closedBySweeps), Array<number>(closedBySweeps).fill(4008));
  reader.close();
  for (const client of silent) client.socket.terminate();
});
