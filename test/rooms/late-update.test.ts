// An update whose write became durable late (released by the seq order after later ones) reaches a
// socket that is in the middle of a paced replay: the replay read past its seq before it was in the
// log, and a replaying socket is on no topic.

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
