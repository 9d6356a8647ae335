// An event and its runs commit together or not at all, on the real runtime and LMDB. A failure
// while the runs are computed leaves nothing behind (lmdb-js commits the writes a conditional
// batch queued before a throw, so nothing may be queued before the runs are known), and the
// client's retry is accepted instead of a 409 for a half-stored event. A creating write that
// commits but whose flush fails leaves its runs to be picked up from the ledger after the pause.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { FIRST_RETRY_MS } from '../../runtime/runs/stalled-runs.ts';
import type { WorkflowVersion } from '../../runtime/workflows/workflow-types.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { failNextEventFlush } from '../helpers/unflushed-event.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const clock = new ManualClock(Date.UTC(2026, 10, 30, 9, 0, 0));
let rt: TestRuntime;
let receiver: Receiver;

before(async () => {
  rt = await startRuntime({ clock });
  receiver = await startReceiver();
});
after(async () => {
  await rt.close();
  await receiver.close();
});

/** An org with two workflows on `job.run`, each posting to its own path. */
async function setup(org: string): Promise<string> {
  const key = await createOrg(rt.url, ADMIN_TOKEN, org);
  for (const name of ['first', 'second']) {
    const wf = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name, trigger_event: 'job.run', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/${org}/${name}` }] } });
    assert.equal(wf.status, 201, wf.text);
  }
  return key;
}

const send = (org: string, key: string, id: string): ReturnType<typeof call> =>
  call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'job.run', payload: {}, id } });

const runStates = async (org: string, key: string): Promise<string[]> =>
  ((await call(rt.url, 'GET', `/organizations/${org}/runs`, { token: key })).body.runs as Array<{ state: string }>).map((r) => r.state).sort();

test('a failure computing the second run stores neither the event nor the first run, and the retry creates both', async () => {
  const org = 'acct-create-throw';
  const key = await setup(org);
  const { workflows } = rt.runtime;
  const matching = workflows.matching.bind(workflows);
  let failOnce = true;
  workflows.matching = (orgId, environment, type) => {
    const versions = matching(orgId, environment, type);
    if (orgId !== org || !failOnce) return versions;
    failOnce = false;
    assert.equal(versions.length, 2);
    // The second version breaks as a corrupt record would, after the first run was computed.
    const broken = Object.defineProperty({ ...versions[1]! }, 'definition', { get: () => { throw new Error('corrupt workflow version'); } }) as WorkflowVersion;
    return [versions[0]!, broken];
  };
  try {
    const refused = await send(org, key, 'evt-half');
    assert.equal(refused.status, 500, refused.text);
    assert.equal((await call(rt.url, 'GET', `/organizations/${org}/events/evt-half`, { token: key })).status, 404, 'the event was not stored');
    assert.deepEqual(await runStates(org, key), [], 'no run was stored');

    const retried = await send(org, key, 'evt-half');
    assert.equal(retried.status, 202, retried.text);
    await eventually('both runs to complete', () => runStates(org, key), (states) => states.join() === 'completed,completed');
    assert.equal(receiver.received.filter((r) => r.path.startsWith(`/${org}/`)).length, 2, 'each step went out once');
  } finally {
    workflows.matching = matching;
  }
});

test('runs whose creating write commits but does not flush are picked up from the ledger after the pause', async () => {
  const org = 'acct-create-unflushed';
  const key = await setup(org);
  const restore = failNextEventFlush(rt.runtime.ledger, org);
  try {
    const refused = await send(org, key, 'evt-unflushed');
    assert.equal(refused.status, 500, refused.text);
    const states = await runStates(org, key);
    assert.equal(states.length, 2, 'the runs are in the ledger');
    assert.ok(!states.includes('completed'));
    assert.equal(rt.runtime.engine.stalled.size, 2, 'both runs wait to be picked up again');
    assert.equal(receiver.received.filter((r) => r.path.startsWith(`/${org}/`)).length, 0, 'nothing went out before the event was known to be on disk');

    clock.advance(FIRST_RETRY_MS);
    assert.equal(rt.runtime.engine.stalled.timers.fireDue(), 2);
    await eventually('both runs to complete', () => runStates(org, key), (states) => states.join() === 'completed,completed');
    assert.equal(receiver.received.filter((r) => r.path.startsWith(`/${org}/`)).length, 2, 'each step went out once');
    // A write is visible (committed) before its flush confirms it, and a run leaves the stalled set on the confirmation.
    await eventually('the runs to leave the stalled set', () => rt.runtime.engine.stalled.size, (size) => size === 0);
  } finally {
    restore();
  }
});

test('a put that throws while the runs are written leaks no slot: the org runs its next event', async () => {
  const org = 'acct-create-put-throws';
  const key = await createOrg(rt.url, ADMIN_TOKEN, org);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 1 } })).status, 200);
  const wf = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'only', trigger_event: 'job.run', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/${org}/only` }] } });
  assert.equal(wf.status, 201, wf.text);
  const { runs } = rt.runtime.context;
  const write = runs.write.bind(runs);
  let failOnce = true;
  runs.write = (run, previous) => {
    if (failOnce && previous === undefined && run.context.orgId === org) {
      failOnce = false;
      throw new Error('MDB_BAD_VALSIZE: the value is refused');
    }
    write(run, previous);
  };
  try {
    assert.equal((await send(org, key, 'evt-refused-put')).status, 500);
  } finally {
    runs.write = write;
  }
  // The admitted run's slot comes back once the stalled path has found no such run in the ledger
  // twice (the first time, its write might still have been on its way).
  clock.advance(FIRST_RETRY_MS);
  assert.equal(rt.runtime.engine.stalled.timers.fireDue(), 1);
  await eventually('the second pause to be armed', () => rt.runtime.engine.stalled.size, (n) => n === 1);
  clock.advance(2 * FIRST_RETRY_MS);
  assert.equal(rt.runtime.engine.stalled.timers.fireDue(), 1);
  await eventually('the run to count as gone', () => rt.runtime.engine.stalled.size, (n) => n === 0);
  assert.equal((await send(org, key, 'evt-next')).status, 202);
  await eventually('the next event to run', () => runStates(org, key), (states) => states.join() === 'completed');
});
