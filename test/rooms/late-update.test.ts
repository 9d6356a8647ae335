// An update whose write became durable late (released by the seq order after later ones) reaches
// each socket exactly once, when it is published: one in the middle of a paced replay that read past
// its seq before it was in the log (a replaying socket is on no topic), one that was live all along,
// and one whose replay found it in the log before it was known to be on disk.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import type { NewRunUpdate } from '../../runtime/rooms/update-log.ts';
import { createOrg } from '../helpers/http.ts';
import { connectLive } from '../helpers/live-client.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-late';
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => rt.close());

const update = (runId: string, bytes: number): NewRunUpdate => ({
  run_id: runId, state: 'running', channel: 'c', workflow_id: 'wf', event_id: 'evt', step_id: 's', attempt: 1, at_ms: 1, error: 'e'.repeat(bytes), environment: 'production',
});

test('a late update is sent to a replay that went past its seq while it was not in the log', async () => {
  const { ledger, updateLog, rooms } = rt.runtime;
  const table = ledger.openDatabase('live-updates');
  // The late one: its seq is taken first, but its entry is out of the log while the replay reads.
  const [late] = await durably(ledger.root, ledger.root.transaction(() => [updateLog.append(ORG, update('run-late', 10))])) as RunUpdate[];
  await durably(ledger.root, table.remove([ORG, late!.seq]));
  // A backlog that stalls the replay on backpressure while the client does not read.
  const backlog = await durably(ledger.root, ledger.root.transaction(() => Array.from({ length: 300 }, (_, i) => updateLog.append(ORG, update(`run-${i}`, 60_000)))));
  rooms.publish(ORG, backlog);
  rooms.releaseGaps();

  const client = await connectLive(rt.url, ORG, { query: `?token=${encodeURIComponent(key)}&after_seq=0` });
  const socket = (client.socket as unknown as { _socket: { pause(): void; resume(): void } })._socket;
  socket.pause();
  await client.waitFor(() => rt.runtime.rooms.replayingCount === 1, 'the replay under way');
  // Now the late write becomes durable and is fanned out, behind seqs already published.
  await durably(ledger.root, table.put([ORG, late!.seq], late));
  rooms.publish(ORG, [late!]);
  socket.resume();
  await client.waitFor(() => client.updates().length >= backlog.length + 1, 'every update', 20_000);
  const seqs = client.updates().map((u) => u.seq);
  assert.equal(seqs.filter((seq) => seq === late!.seq).length, 1, 'the late update arrived once');
  assert.equal(new Set(seqs).size, seqs.length, 'nothing twice');
  client.close();
});

test('a late update that is in the log but not yet published is not replayed from it: it comes once, when published, to that socket and to one live all along', async () => {
  const org = 'acct-late-replayed';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const { ledger, updateLog, rooms } = rt.runtime;
  const watcher = await connectLive(rt.url, org, { token: orgKey });
  // The late one is committed first, but published only after the ones behind it were, and their gap skipped:
  // until it is published, it counts as possibly not on disk yet.
  const [late] = await durably(ledger.root, ledger.root.transaction(() => [updateLog.append(org, update('run-late', 10))])) as RunUpdate[];
  const behind = await durably(ledger.root, ledger.root.transaction(() => Array.from({ length: 3 }, (_, i) => updateLog.append(org, update(`run-${i}`, 10)))));
  rooms.publish(org, behind);
  rooms.releaseGaps();
  await watcher.waitFor(() => watcher.updates().length === 3, 'the watcher to get the three behind it');

  const replayed = await connectLive(rt.url, org, { query: `?token=${encodeURIComponent(orgKey)}&after_seq=0` });
  await replayed.waitFor(() => replayed.updates().length === 3 && rooms.replayingCount === 0, 'the replay of the three published ones, then live');
  rooms.publish(org, [late!]);
  const [after] = await durably(ledger.root, ledger.root.transaction(() => [updateLog.append(org, update('run-after', 10))]));
  rooms.publish(org, [after!]);
  await replayed.waitFor(() => replayed.updates().some((u) => u.seq === after!.seq), 'the update after the late one');
  await watcher.waitFor(() => watcher.updates().some((u) => u.seq === after!.seq), 'the watcher to get it too');
  const expected = [...behind.map((u) => u.seq), late!.seq, after!.seq];
  assert.deepEqual(replayed.updates().map((u) => u.seq), expected, 'the late one once, when it was published');
  assert.deepEqual(watcher.updates().map((u) => u.seq), expected);
  watcher.close();
  replayed.close();
});

test('a late update a socket got live after joining past its seq is not sent again by its next Subscribe', async () => {
  const org = 'acct-late-resubscribed';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const { ledger, updateLog, rooms } = rt.runtime;
  const append = async (runId: string) => (await durably(ledger.root, ledger.root.transaction(() => [updateLog.append(org, update(runId, 10))])) as RunUpdate[])[0]!;
  rooms.publish(org, [await append('run-first')]);
  // Durable, but its publish held back (a slow write) while the one after it waits, then is skipped past.
  const late = await append('run-late');
  rooms.publish(org, [await append('run-behind')]);
  rooms.releaseGaps();
  const client = await connectLive(rt.url, org, { token: orgKey });
  rooms.publish(org, [late]);
  await client.waitFor(() => client.updates().some((u) => u.seq === late.seq), 'the late update, live');
  client.subscribe({ after_seq: 0 });
  await client.waitFor(() => client.messages.some((m) => 'heartbeat' in m && m.heartbeat.subscribe_frames === 1) && rooms.replayingCount === 0, 'the replay to finish');
  const last = await append('run-last');
  rooms.publish(org, [last]);
  await client.waitFor(() => client.updates().some((u) => u.seq === last.seq), 'the next update, live again');
  const seqs = client.updates().map((u) => u.seq);
  assert.equal(seqs.filter((seq) => seq === late.seq).length, 1, `the late one once: ${seqs.join(',')}`);
  assert.equal(new Set(seqs).size, seqs.length, `nothing twice: ${seqs.join(',')}`);
  client.close();
});

test('a late update below where a replay started reaches that replaying socket once, and its next Subscribe does not send it again', async () => {
  const org = 'acct-late-below-start';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const { ledger, updateLog, rooms } = rt.runtime;
  const append = async (updates: NewRunUpdate[]) => await durably(ledger.root, ledger.root.transaction(() => updates.map((u) => updateLog.append(org, u)))) as RunUpdate[];
  rooms.publish(org, await append([update('run-first', 10)]));
  // Durable, but its publish held back (a slow write) while the one after it goes out past its gap.
  const [late] = await append([update('run-late', 10)]);
  const [position] = await append([update('run-position', 10)]);
  rooms.publish(org, [position!]);
  rooms.releaseGaps();
  // A backlog after that position stalls a replay from it while its client does not read.
  const backlog = await append(Array.from({ length: 300 }, (_, i) => update(`run-${i}`, 60_000)));
  rooms.publish(org, backlog);

  const client = await connectLive(rt.url, org, { query: `?token=${encodeURIComponent(orgKey)}&after_seq=${position!.seq}` });
  const socket = (client.socket as unknown as { _socket: { pause(): void; resume(): void } })._socket;
  socket.pause();
  await client.waitFor(() => rooms.replayingCount === 1, 'the replay under way');
  rooms.publish(org, [late!]);
  socket.resume();
  await client.waitFor(() => client.updates().length >= backlog.length + 1 && rooms.replayingCount === 0, 'the backlog and the late update', 20_000);
  assert.equal(client.updates().filter((u) => u.seq === late!.seq).length, 1, 'the late update arrived once, during the replay');

  client.subscribe({ after_seq: 0 });
  await client.waitFor(() => client.messages.some((m) => 'heartbeat' in m && m.heartbeat.subscribe_frames === 1) && rooms.replayingCount === 0, 'the second replay to finish', 20_000);
  const seqs = client.updates().map((u) => u.seq);
  assert.equal(seqs.filter((seq) => seq === late!.seq).length, 1, 'not sent again by the Subscribe');
  assert.equal(seqs.filter((seq) => seq === backlog[0]!.seq).length, 1, 'nothing else again either');
  client.close();
});
