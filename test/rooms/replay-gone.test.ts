// A replay that needs updates the log no longer holds ends with 4410 instead of skipping them:
// asked with an after_seq older than the retention, or overtaken while the client was not reading.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import { CLOSE_REPLAY_GONE } from '../../runtime/rooms/live-close-codes.ts';
import type { NewRunUpdate } from '../../runtime/rooms/update-log.ts';
import { createOrg } from '../helpers/http.ts';
import { connectLive, type LiveClient } from '../helpers/live-client.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const RETAINED = 400;
let rt: TestRuntime;
const keys = new Map<string, string>();
before(async () => {
  rt = await startRuntime({ args: ['--live-retention', String(RETAINED)] });
  for (const org of ['acct-gone-old', 'acct-gone-overtaken', 'acct-gone-resubscribed']) keys.set(org, await createOrg(rt.url, ADMIN_TOKEN, org));
});
after(async () => rt.close());

const update = (runId: string, bytes: number): NewRunUpdate => ({
  run_id: runId, state: 'running', channel: 'c', workflow_id: 'wf', event_id: 'evt', step_id: 's', attempt: 1, at_ms: 1, error: 'e'.repeat(bytes), environment: 'production',
});

async function commit(orgId: string, count: number, bytes: number): Promise<RunUpdate[]> {
  const { ledger, updateLog, rooms } = rt.runtime;
  const stored = await durably(ledger.root, ledger.root.transaction(() => Array.from({ length: count }, (_, i) => updateLog.append(orgId, update(`run-${i}`, bytes)))));
  rooms.publish(orgId, stored);
  return stored;
}

/** The close, or 'still open' after 10 s: a guard, so a socket that never closes fails the test instead of hanging it. */
async function closeOf(client: LiveClient): Promise<{ code: number; reason: string } | 'still open'> {
  let guard: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([client.closed, new Promise<'still open'>((resolve) => (guard = setTimeout(() => resolve('still open'), 10_000)))]);
  clearTimeout(guard);
  return outcome;
}

const liveQuery = (orgId: string, afterSeq: number) => ({ query: `?token=${encodeURIComponent(keys.get(orgId)!)}&after_seq=${afterSeq}` });

test('an after_seq older than the retained log is closed with 4410; 0 and a retained position replay', async () => {
  const org = 'acct-gone-old';
  await commit(org, RETAINED + 100, 10); // seqs 1-500; 101-500 retained
  const stale = await connectLive(rt.url, org, liveQuery(org, 50));
  const closed = await closeOf(stale);
  assert.ok(closed !== 'still open', 'the socket was closed');
  assert.equal(closed.code, CLOSE_REPLAY_GONE);
  assert.match(closed.reason, /no longer retained \(oldest: 101\)/);
  assert.equal(stale.updates().length, 0, 'nothing was sent that would look like a complete replay');
  for (const [afterSeq, expected] of [[0, RETAINED], [100, RETAINED], [450, 50]] as const) {
    const fine = await connectLive(rt.url, org, liveQuery(org, afterSeq));
    await fine.waitFor(() => fine.updates().length === expected, `${expected} updates after ${afterSeq}`);
    fine.close();
  }
});

test('a replay overtaken by new updates while its client does not read ends with 4410 instead of skipping the dropped ones', async () => {
  const org = 'acct-gone-overtaken';
  const bytes = 60_000;
  await commit(org, RETAINED, bytes); // 24 MB: more than the socket buffers hold
  const client = await connectLive(rt.url, org, liveQuery(org, 0));
  (client.socket as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
  // New updates push seqs 1-300 out of the log while the replay waits for the client.
  await commit(org, 300, 10);
  (client.socket as unknown as { _socket: { pause(): void; resume(): void } })._socket.resume();
  const closed = await closeOf(client);
  assert.ok(closed !== 'still open', 'the socket was closed');
  assert.equal(closed.code, CLOSE_REPLAY_GONE);
  const seqs = client.updates().map((u) => u.seq);
  assert.ok(seqs.length > 0 && seqs.length < 300, `received ${seqs.length} before the close`);
  assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'what came before the close was complete and in order');
});

test('joining the live stream sends a heartbeat whose last_seq is a position to resume from', async () => {
  const org = 'acct-gone-old';
  const latest = rt.runtime.updateLog.lastSeq(org);
  const client = await connectLive(rt.url, org, { query: `?token=${encodeURIComponent(keys.get(org)!)}` });
  const [next] = await commit(org, 1, 10);
  await client.waitFor(() => client.updates().length === 1, 'the next update');
  // The heartbeat came with the join, before the update (the periodic ones come every 5 s).
  assert.deepEqual('heartbeat' in client.messages[0]! && client.messages[0].heartbeat.last_seq, latest);
  assert.deepEqual('run_update' in client.messages[1]! && client.messages[1].run_update.seq, next!.seq);
  client.close();
});

test('a Subscribe on a socket that was live through the dropped stretch is not closed: it was sent all of it', async () => {
  const org = 'acct-gone-overtaken';
  const client = await connectLive(rt.url, org, { query: `?token=${encodeURIComponent(keys.get(org)!)}` });
  await client.waitFor(() => client.messages.length > 0, 'the join heartbeat');
  const first = await commit(org, 1, 10);
  await commit(org, RETAINED + 100, 10); // pushes `first` and the next 100 out of the log
  await client.waitFor(() => client.updates().length === RETAINED + 101, 'every update live');
  client.subscribe({ after_seq: first[0]!.seq });
  const last = await commit(org, 1, 10);
  await client.waitFor(() => client.updates().some((u) => u.seq === last[0]!.seq), 'the next live update');
  const seqs = client.updates().map((u) => u.seq);
  assert.equal(new Set(seqs).size, seqs.length, 'nothing sent twice');
  assert.equal(await Promise.race([client.closed.then(() => 'closed'), Promise.resolve('open')]), 'open');
  client.close();
});

test('an after_seq past every update sent out (a position from a replaced data dir) is closed with 4410, not followed silently', async () => {
  const org = 'acct-gone-old';
  const last = (await commit(org, 1, 10))[0]!.seq;
  const ahead = await connectLive(rt.url, org, liveQuery(org, last + 1000));
  const closed = await closeOf(ahead);
  assert.ok(closed !== 'still open', 'the socket was closed');
  assert.equal(closed.code, CLOSE_REPLAY_GONE);
  assert.match(closed.reason, new RegExp(`after_seq ${last + 1000} is past the last update sent \\(seq ${last}\\)`));
  const atTheEnd = await connectLive(rt.url, org, liveQuery(org, last));
  const [next] = await commit(org, 1, 10);
  await atTheEnd.waitFor(() => atTheEnd.updates().some((u) => u.seq === next!.seq), 'the last position itself streams on');
  atTheEnd.close();
});

test('a socket that replayed whatever is retained (after_seq 0) is refused with 4410 when it then subscribes strictly from a position the log dropped', async () => {
  const org = 'acct-gone-resubscribed';
  await commit(org, RETAINED + 100, 10); // seqs 1-500; 101-500 retained
  const client = await connectLive(rt.url, org, liveQuery(org, 0));
  await client.waitFor(() => client.updates().length === RETAINED, 'the retained updates');
  // It was sent 101-500, not 51-100: those are gone, and a fresh socket asking for them gets 4410.
  client.subscribe({ after_seq: 50, strict: true, run_id: 'run-60' });
  const closed = await closeOf(client);
  assert.ok(closed !== 'still open', 'the socket was closed');
  assert.equal(closed.code, CLOSE_REPLAY_GONE);
  assert.match(closed.reason, /updates after seq 50 are no longer retained \(oldest: 101\)/);
});
