// What a Subscribe frame leaves a client with: no update twice after a restart, a heartbeat
// position the new subscription holds, no waiting on seqs that will never come back, and no
// sandbox stream once the org's plan has no sandbox.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import { CLOSE_SANDBOX_DISABLED } from '../../runtime/rooms/live-close-codes.ts';
import type { NewRunUpdate } from '../../runtime/rooms/update-log.ts';
import { call, createOrg } from '../helpers/http.ts';
import { connectLive } from '../helpers/live-client.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';

const update = (runId: string, environment = 'production'): NewRunUpdate => ({
  run_id: runId, state: 'completed', channel: 'c', workflow_id: 'wf', event_id: 'evt', step_id: 's', attempt: 1, at_ms: 1, error: '', environment,
});

async function append(rt: TestRuntime, orgId: string, updates: NewRunUpdate[]): Promise<RunUpdate[]> {
  const { ledger, updateLog } = rt.runtime;
  return durably(ledger.root, ledger.root.transaction(() => updates.map((u) => updateLog.append(orgId, u))));
}

test('after a restart, a Subscribe on a socket that replayed from the URL sends nothing it already got', async () => {
  const dataDir = tempDir();
  let rt = await startRuntime({ dataDir });
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-restart');
  rt.runtime.rooms.publish('acct-restart', await append(rt, 'acct-restart', [update('a'), update('b'), update('c')]));
  await rt.close();
  rt = await startRuntime({ dataDir });
  try {
    const client = await connectLive(rt.url, 'acct-restart', { query: `?token=${key}&after_seq=0` });
    await client.waitFor(() => client.updates().length === 3 && rt.runtime.rooms.replayingCount === 0, 'the URL replay');
    client.subscribe({ after_seq: 0 });
    // The next update shows the Subscribe was handled and the socket is live again.
    const [next] = await append(rt, 'acct-restart', [update('d')]);
    rt.runtime.rooms.publish('acct-restart', [next!]);
    await client.waitFor(() => client.updates().some((u) => u.seq === next!.seq), 'the next update');
    assert.deepEqual(client.updates().map((u) => u.seq), [1, 2, 3, 4]);
    client.close();
  } finally {
    await rt.close();
  }
});

test('the heartbeat that ends a live stretch for a Subscribe holds for the new subscription: nothing below it follows', async () => {
  const rt = await startRuntime();
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-leave');
    rt.runtime.rooms.publish('acct-leave', await append(rt, 'acct-leave', Array.from({ length: 20 }, (_, i) => update(`r${i}`))));
    const client = await connectLive(rt.url, 'acct-leave', { token: key });
    await client.waitFor(() => client.messages.length === 1, 'the join heartbeat');
    client.subscribe({ after_seq: 5 });
    await client.waitFor(() => client.updates().length === 15 && rt.runtime.rooms.replayingCount === 0, 'the replay from 5');
    // README: after a Subscribe the position is its after_seq, then the larger of what follows.
    let position = 5;
    for (const message of client.messages.slice(1)) {
      if ('heartbeat' in message) {
        position = Math.max(position, message.heartbeat.last_seq);
      } else {
        assert.ok(message.run_update.seq > position, `seq ${message.run_update.seq} came after position ${position}`);
        position = message.run_update.seq;
      }
    }
    client.close();
  } finally {
    await rt.close();
  }
});

test('a replay does not wait on seqs removed from the log; one not yet durable comes once, when published', async () => {
  const rt = await startRuntime();
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-removed', 'pro');
    const { rooms, ledger, updateLog } = rt.runtime;
    rooms.publish('acct-removed', await append(rt, 'acct-removed', Array.from({ length: 1100 }, (_, i) => update(`s${i}`, 'sandbox'))));
    // What a sandbox reset does to the log: 1,100 seqs that will never be published again.
    await durably(ledger.root, ledger.root.transaction(() => updateLog.removeEnvironment('acct-removed', 'sandbox')));
    // The first of these is committed but not yet published (its flush is slow); the second is, past the gap.
    const [slow, fast] = await append(rt, 'acct-removed', [update('slow'), update('fast')]);
    rooms.publish('acct-removed', [fast!]);
    rooms.releaseGaps();
    const client = await connectLive(rt.url, 'acct-removed', { query: `?token=${key}&after_seq=0` });
    await client.waitFor(() => rooms.replayingCount === 0 && client.updates().length === 1, 'the replay');
    rooms.publish('acct-removed', [slow!]);
    await client.waitFor(() => client.updates().length === 2, 'the slow one, published late');
    const [after] = await append(rt, 'acct-removed', [update('after')]);
    rooms.publish('acct-removed', [after!]);
    await client.waitFor(() => client.updates().some((u) => u.seq === after!.seq), 'the one after');
    assert.deepEqual(client.updates().map((u) => u.seq), [fast!.seq, slow!.seq, after!.seq]);
    client.close();
  } finally {
    await rt.close();
  }
});

test('moving an org to a plan without a sandbox closes its sandbox sockets with 4402', async () => {
  const rt = await startRuntime();
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-downgrade-live', 'pro');
    const sandbox = await connectLive(rt.url, 'acct-downgrade-live', { query: `?token=${key}&environment=sandbox` });
    const production = await connectLive(rt.url, 'acct-downgrade-live', { token: key });
    assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-downgrade-live', { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
    let closedWith: number | undefined;
    void sandbox.closed.then((closed) => (closedWith = closed.code));
    await sandbox.waitFor(() => closedWith !== undefined, 'the sandbox socket to close');
    assert.equal(closedWith, CLOSE_SANDBOX_DISABLED);
    const [next] = await append(rt, 'acct-downgrade-live', [update('p')]);
    rt.runtime.rooms.publish('acct-downgrade-live', [next!]);
    await production.waitFor(() => production.updates().length === 1, 'the production socket still streams');
    production.close();
  } finally {
    await rt.close();
  }
});

test('a plan change to starter whose write fails after it committed (a 5xx) still closes the sandbox sockets', async () => {
  const rt = await startRuntime();
  try {
    const org = 'acct-downgrade-flush-failed';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
    const sandbox = await connectLive(rt.url, org, { query: `?token=${key}&environment=sandbox` });
    const { orgs } = rt.runtime.context;
    const update = orgs.update.bind(orgs);
    // Committed, then its flush reported failed.
    orgs.update = async (...args) => {
      await update(...args);
      throw new Error('the flush failed');
    };
    let answer;
    try {
      answer = await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } });
    } finally {
      orgs.update = update;
    }
    assert.ok(answer.status >= 500, `${answer.status} ${answer.text}`);
    assert.equal(orgs.get(org)?.plan, 'starter');
    let closedWith: number | undefined;
    void sandbox.closed.then((closed) => (closedWith = closed.code));
    await sandbox.waitFor(() => closedWith !== undefined, 'the sandbox socket to close');
    assert.equal(closedWith, CLOSE_SANDBOX_DISABLED);
  } finally {
    await rt.close();
  }
});

/** Publishes one more update and waits for the client to get it: every frame sent before has been handled. */
async function settle(rt: TestRuntime, orgId: string, client: Awaited<ReturnType<typeof connectLive>>): Promise<void> {
  const [marker] = await append(rt, orgId, [update('marker')]);
  rt.runtime.rooms.publish(orgId, [marker!]);
  await client.waitFor(() => rt.runtime.rooms.replayingCount === 0 && client.updates().some((u) => u.seq === marker!.seq), 'the marker update');
}

const repeated = (seqs: number[]): number[] => seqs.filter((seq, i) => seqs.indexOf(seq) !== i);

test('Subscribe sequences repeat nothing: into one run and back, two replays in a row, a live stretch with a skipped seq', async () => {
  const rt = await startRuntime();
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-sequences');
    const org = 'acct-sequences';
    const publish = async (runIds: string[]) => rt.runtime.rooms.publish(org, await append(rt, org, runIds.map((r) => update(r))));

    // Into one run's room and back to the environment.
    await publish(['x', 'y', 'R']);
    const zoom = await connectLive(rt.url, org, { token: key });
    await publish(['x', 'y', 'R']);
    await zoom.waitFor(() => zoom.updates().length === 3, 'three live updates');
    zoom.subscribe({ after_seq: 0, run_id: 'R' });
    zoom.subscribe({ after_seq: 0 });
    await settle(rt, org, zoom);
    assert.deepEqual(repeated(zoom.updates().map((u) => u.seq)), []);
    zoom.close();

    // Two Subscribes in one write: the second interrupts the first replay.
    const twice = await connectLive(rt.url, org, { token: key });
    await publish(Array.from({ length: 300 }, (_, i) => `n${i}`));
    await twice.waitFor(() => twice.updates().length === 300, 'the live updates');
    twice.subscribe({ after_seq: 0 });
    twice.subscribe({ after_seq: 0 });
    await settle(rt, org, twice);
    assert.deepEqual(repeated(twice.updates().map((u) => u.seq)), []);
    twice.close();

    // A live stretch in which one seq was skipped (its write aborted).
    const gap = await connectLive(rt.url, org, { token: key });
    await publish(['a']);
    const { ledger, updateLog, rooms } = rt.runtime;
    await ledger.root.transaction(() => {
      updateLog.append(org, update('aborted'));
      throw new Error('abort');
    }).catch(() => undefined);
    await publish(['c', 'd']);
    rooms.releaseGaps();
    await gap.waitFor(() => gap.updates().length === 3, 'the live updates around the gap');
    gap.subscribe({ after_seq: 0 });
    await settle(rt, org, gap);
    assert.deepEqual(repeated(gap.updates().map((u) => u.seq)), []);
    gap.close();
  } finally {
    await rt.close();
  }
});

test('frames of the earlier subscription still in flight after a Subscribe come before a heartbeat carrying its count, and never move the resume position', async () => {
  const rt = await startRuntime();
  try {
    const org = 'acct-in-flight';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    const { rooms } = rt.runtime;
    const first = await append(rt, org, ['x0', 'target', 'x1', 'x2', 'target', 'x3'].map((id) => update(id)));
    rooms.publish(org, first);
    const client = await connectLive(rt.url, org, { token: key });
    await client.waitFor(() => client.messages.some((m) => 'heartbeat' in m), 'the join heartbeat');
    const targetSeqs = first.filter((u) => u.run_id === 'target').map((u) => u.seq);
    const afterSeq = first[0]!.seq;
    const inFlight = await append(rt, org, ['y0', 'y1', 'y2'].map((id) => update(id)));
    const sentAt = client.messages.length;
    client.subscribe({ after_seq: afterSeq, run_id: 'target' });
    // Published before the server reads the frame (same event loop, no await between): they go to
    // the old room and reach the client after it sent its Subscribe, with seqs past the target's.
    rooms.publish(org, inFlight);
    await client.waitFor(() => client.updates().filter((u) => u.run_id === 'target').length === targetSeqs.length && rooms.replayingCount === 0, 'the target run replayed');
    const after = client.messages.slice(sentAt);
    const boundary = after.findIndex((m) => 'heartbeat' in m && m.heartbeat.subscribe_frames === 1);
    assert.ok(boundary >= 0, 'a heartbeat says the Subscribe was applied');
    assert.ok(after.slice(0, boundary).some((m) => 'run_update' in m && m.run_update.run_id !== 'target'), 'the old room\'s frames came first (the race this guards)');
    assert.deepEqual(after.slice(boundary).flatMap((m) => ('run_update' in m ? [m.run_update.run_id] : [])), targetSeqs.map(() => 'target'), 'after it, only the new subscription');

    // README: the position starts at the Subscribe's after_seq and moves only with frames from that
    // heartbeat on. A socket dropped after any number of these frames resumes without a loss.
    for (let received = 0; received <= after.length; received += 1) {
      let position = afterSeq;
      let applied = false;
      const got = new Set<number>();
      for (const message of after.slice(0, received)) {
        if ('heartbeat' in message) applied ||= message.heartbeat.subscribe_frames === 1;
        if (!applied) continue;
        if ('heartbeat' in message) position = Math.max(position, message.heartbeat.last_seq);
        else {
          got.add(message.run_update.seq);
          position = Math.max(position, message.run_update.seq);
        }
      }
      const lost = targetSeqs.filter((seq) => !got.has(seq) && seq <= position);
      assert.deepEqual(lost, [], `dropped after ${received} frames: resuming from ${position} loses nothing`);
    }
    client.close();
  } finally {
    await rt.close();
  }
});
