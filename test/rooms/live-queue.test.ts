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

test('the queue counts each socket as of its last look; an org\'s replays get three quarters of its share, whatever other orgs hold', () => {
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
  for (const org of ['b', 'c', 'd', 'e', 'f']) queue.count(socketOf(org, 750));
  assert.equal(queue.replayRoom('a'), 750, 'five orgs holding their replay parts, past the total, take nothing of a\'s');
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

test('past the total the largest sockets of the org holding the most are closed until all are within it: an org holding little keeps its sockets', () => {
  const queue = new LiveQueue(1000, 1000);
  const sockets = [socketOf('small', 450), socketOf('big', 300), socketOf('big', 300), socketOf('big', 300)];
  sockets.forEach((ws, i) => (ws.name = `s${i}`));
  for (const ws of sockets) queue.count(ws);
  const closed: string[] = [];
  queue.closeLargestOverShare(sockets, (ws) => closed.push((ws as unknown as { name: string }).name));
  // 1,350 of 1,000: big (900) loses a socket, and still holds the most (600 to 450): another.
  assert.deepEqual(closed, ['s3', 's2'], 'small\'s one socket, the largest of all, stays');
  assert.equal(queue.held, 750);
});

// Over real sockets: a total of 8 MiB, so an org's share is 2 MiB and its replays fill 1.5 MiB.
const TOTAL = 8 * 1024 * 1024;
const SHARE = TOTAL / 4;
const REPLAY_ROOM = (SHARE * 3) / 4;
const UPDATE_BYTES = 16 * 1024;
/** Orgs whose replay parts together pass the total. */
const MANY = Array.from({ length: Math.ceil(TOTAL / REPLAY_ROOM) + 1 }, (_, i) => `acct-lq-many-${i}`);

let rt: TestRuntime;
const keys = new Map<string, string>();
before(async () => {
  rt = await startRuntime({ args: ['--live-retention', '10000'], liveQueueBytes: TOTAL });
  for (const org of ['acct-lq-stalled', 'acct-lq-other', 'acct-lq-topic', 'acct-lq-fresh', ...MANY]) keys.set(org, await createOrg(rt.url, ADMIN_TOKEN, org));
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
const replayFrom0 = async (org: string): Promise<LiveClient> => connectLive(rt.url, org, { query: `?token=${encodeURIComponent(keys.get(org)!)}&after_seq=0` });
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

test('orgs whose stopped replays together pass the total: the sweeps close the largest sockets of the orgs holding the most until all are within it; an org holding little replays meanwhile', { timeout: 120_000 }, async () => {
  const { rooms } = rt.runtime;
  const stalled: LiveClient[] = [];
  for (const org of MANY) {
    // 16 MB each socket is owed, more than the kernel's buffers take for it.
    for (let i = 0; i < 2; i++) await commit(org, 500);
    for (let i = 0; i < 8; i++) {
      const client = await replayFrom0(org);
      pause(client);
      stalled.push(client);
    }
  }
  // Ended however the test goes: a socket left stopped would fill the next test's org.
  try {
    let closedBySweeps = 0;
    // Filled past what three quarters of the total would leave, before the fresh org asks.
    for (let round = 0; round < 3000 && rooms.queuedBytes < (TOTAL * 3) / 4; round++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      closedBySweeps += await rooms.sweepQueue();
    }
    assert.ok(rooms.queuedBytes >= (TOTAL * 3) / 4, `the stopped replays hold ${rooms.queuedBytes} bytes`);
    const fresh = 'acct-lq-fresh';
    const backlog = await commit(fresh, 500);
    const reader = await replayFrom0(fresh);
    for (let round = 0; round < 3000 && reader.updates().length < backlog.length; round++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      closedBySweeps += await rooms.sweepQueue();
    }
    assert.equal(reader.updates().length, backlog.length, 'the org holding little got its whole replay');
    // The stopped replays fill the kernel's buffers first, then their parts, then pass the total.
    for (let round = 0; round < 3000 && closedBySweeps === 0; round++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      closedBySweeps += await rooms.sweepQueue();
    }
    assert.ok(closedBySweeps > 0, 'the replay parts together passed the total, and the sweeps closed sockets for it');
    assert.ok(rooms.queuedBytes <= TOTAL, `${rooms.queuedBytes} bytes queued after a sweep, past the total of ${TOTAL}`);
    assert.equal(reader.socket.readyState, reader.socket.OPEN, 'the reader was not closed');
    reader.close();
  } finally {
    for (const client of stalled) client.socket.terminate();
  }
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
  // 256 KiB a step to every socket (the kernel takes the first megabytes of each, uWS queues the
  // rest), so none reaches uWS's own 1 MiB limit between two sweeps. The runtime's own sweep (each
  // second) and heartbeat (past half of that limit, each 5 s) close with the same 4008 and may come
  // first: what is checked is that silent sockets, and only they, are closed so.
  for (let step = 0; step < 200 && rooms.subscriberCount === open; step++) {
    published += (await commit(org, 16)).length;
    await reader.waitFor(receivedAll(reader, published), 'the reader to keep up', 30_000);
    await rooms.sweepQueue();
  }
  await rooms.sweepQueue();
  const closed = open - rooms.subscriberCount;
  assert.ok(closed > 0 && closed < silent.length + 1, `silent sockets closed: ${closed}`);
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
  await reader.waitFor(() => codes.length >= closed, 'the closed sockets\' close frames', 30_000);
  assert.deepEqual(codes.slice(0, closed), Array<number>(closed).fill(4008));
  reader.close();
  for (const client of silent) client.socket.terminate();
});
