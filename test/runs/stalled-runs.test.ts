// A run whose transition cannot be written is not left where memory and the ledger disagree: it is
// picked up again from its durable snapshot after a pause on the injected clock. A queued run whose
// admission failed to be written gives its slot back and is admitted again; a run whose step result
// failed to be written writes that result again (the step is not sent twice). A command whose run
// cannot be read (a step's answer, an admission, a timer) stalls the run the same way.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { PersistedRun } from '../../actors/run-transition.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { FIRST_RETRY_MS } from '../../runtime/runs/stalled-runs.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const clock = new ManualClock(Date.UTC(2026, 10, 30, 9, 0, 0));
let rt: TestRuntime;
let receiver: Receiver;
/** The next write that matches fails, as a full disk would make it; its run id is kept. */
let failNext: ((run: PersistedRun, previous: PersistedRun | undefined) => boolean) | undefined;
const failed: string[] = [];

before(async () => {
  rt = await startRuntime({ clock });
  receiver = await startReceiver();
  const runs = rt.runtime.context.runs;
  const write = runs.write.bind(runs);
  runs.write = (run, previous) => {
    if (failNext?.(run, previous)) {
      failNext = undefined;
      failed.push(run.context.runId);
      throw new Error('ENOSPC: no space left on device');
    }
    write(run, previous);
  };
});
after(async () => {
  await rt.close();
  await receiver.close();
});

async function setup(org: string, path: string): Promise<string> {
  const key = await createOrg(rt.url, ADMIN_TOKEN, org);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 1 } })).status, 200);
  const wf = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'w', trigger_event: 'job.run', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}${path}` }] } });
  assert.equal(wf.status, 201, wf.text);
  return key;
}

const send = async (org: string, key: string, id: string): Promise<void> =>
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'job.run', payload: {}, id } })).status, 202);

const runStates = async (org: string, key: string): Promise<Map<string, string>> =>
  new Map(((await call(rt.url, 'GET', `/organizations/${org}/runs`, { token: key })).body.runs as Array<{ run_id: string; state: string }>).map((r) => [r.run_id, r.state]));

/** Sends an event whose step is held by the receiver until `release`, once that step is out. */
async function sendHeld(org: string, key: string, path: string, id: string): Promise<() => void> {
  let release: () => void = () => undefined;
  receiver.script([{ status: 200, after: new Promise<void>((resolve) => (release = resolve)) }, { status: 200 }]);
  await send(org, key, id);
  await eventually('the held step to be out', () => receiver.received.filter((r) => r.path === path).length, (n) => n === 1);
  return release;
}

const resumeDue = (): number => {
  clock.advance(FIRST_RETRY_MS);
  return rt.runtime.engine.stalled.timers.fireDue();
};

test('a queued run whose admission could not be written gives back its slot and is admitted again', async () => {
  const org = 'acct-stalled-admit';
  const key = await setup(org, '/admit');
  // The first run holds the only slot.
  const release = await sendHeld(org, key, '/admit', 'first');
  await send(org, key, 'second');
  failNext = (run, previous) => run.value === 'running' && previous?.value === 'queued';
  release();
  await eventually('the admission write to fail', () => failed.length, (n) => n === 1);
  const stalled = failed[0]!;
  const states = await eventually('the first run to complete', () => runStates(org, key), (s) => [...s.values()].includes('completed'));
  assert.equal(states.get(stalled), 'queued', 'the ledger still says queued');
  assert.match((await call(rt.url, 'GET', '/metrics')).text, /^sluice_runs_stalled 1$/m, 'an operator sees it');
  assert.equal(receiver.received.filter((r) => r.path === '/admit').length, 1, 'the second run was not sent');

  assert.equal(resumeDue(), 1, 'the stalled run is picked up after the pause');
  await eventually('the second run to complete', () => runStates(org, key), (s) => s.get(stalled) === 'completed');
  assert.equal(receiver.received.filter((r) => r.path === '/admit').length, 2);
  await eventually('no longer stalled (once the admission is durable)', () => rt.runtime.engine.stalled.has(`${org}\u0000${stalled}`), (stalledStill) => !stalledStill);
});

test('a run whose step result could not be written writes that result after the pause, without sending the step again, however often it fails', async () => {
  const org = 'acct-stalled-step';
  const key = await setup(org, '/step');
  receiver.script([{ status: 200 }]);
  failNext = (run) => run.value === 'completed' && run.context.orgId === org;
  await send(org, key, 'only');
  const answeredAt = clock.now();
  await eventually('the completion write to fail', () => failed.length, (n) => n === 2);
  const stalled = failed[1]!;
  assert.equal((await runStates(org, key)).get(stalled), 'running');
  assert.equal(receiver.received.filter((r) => r.path === '/step').length, 1);

  // Picked up again, its result fails to be written once more: stalled again, nothing sent.
  failNext = (run) => run.value === 'completed' && run.context.orgId === org;
  assert.equal(resumeDue(), 1);
  await eventually('the second write to fail', () => failed.length, (n) => n === 3);
  assert.equal(rt.runtime.engine.stalled.has(`${org}\u0000${stalled}`), true);
  clock.advance(FIRST_RETRY_MS);
  assert.equal(resumeDue(), 1, 'the pause doubled');
  const run = await eventually('the run to complete', async () => (await call(rt.url, 'GET', `/organizations/${org}/runs/${stalled}`, { token: key })).body.run, (r) => r.state === 'completed');
  assert.equal(receiver.received.filter((r) => r.path === '/step').length, 1, 'the step went out once: its answer was kept, not asked for again');
  // The API reads the completion once committed; the engine lets go of the stall once it is durable (a flush later).
  await eventually('no longer stalled', () => rt.runtime.engine.stalled.has(`${org}\u0000${stalled}`), (stalledStill) => !stalledStill);
  const attempts = run.steps[0].attempts as Array<{ attempt: number; outcome: string; ended_at: string }>;
  assert.deepEqual(attempts.map((a) => [a.attempt, a.outcome, a.ended_at]), [[1, 'succeeded', new Date(answeredAt).toISOString()]], 'one attempt, finished when the receiver answered');
});

test('a run cancelled while stalled with its step\'s answer kept records that answer as one that came after the cancel', async () => {
  const org = 'acct-stalled-answer-cancel';
  const key = await setup(org, '/answer-cancel');
  receiver.script([{ status: 200 }]);
  const failedBefore = failed.length;
  failNext = (run) => run.value === 'completed' && run.context.orgId === org;
  await send(org, key, 'answered');
  const answeredAt = clock.now();
  await eventually('the completion write to fail', () => failed.length, (n) => n === failedBefore + 1);
  const runId = failed[failedBefore]!;
  await eventually('the run to stall', () => rt.runtime.engine.stalled.has(`${org}\u0000${runId}`), (stalled) => stalled);

  const cancel = await call(rt.url, 'POST', `/organizations/${org}/runs/${runId}/cancel`, { token: key });
  assert.equal(cancel.status, 200, cancel.text);
  const run = await eventually('the kept answer to be recorded', async () => (await call(rt.url, 'GET', `/organizations/${org}/runs/${runId}`, { token: key })).body.run, (r) => r.steps[0].attempts[0].after_cancel !== null);
  assert.equal(run.state, 'cancelled');
  const attempt = run.steps[0].attempts[0] as { after_cancel: { outcome: string; at: string } };
  assert.deepEqual([attempt.after_cancel.outcome, attempt.after_cancel.at], ['succeeded', new Date(answeredAt).toISOString()], 'the receiver\'s answer, when it came');
  clock.advance(10 * FIRST_RETRY_MS);
  assert.equal(rt.runtime.engine.stalled.timers.fireDue(), 0, 'nothing is left to pick up');
  assert.equal(receiver.received.filter((r) => r.path === '/answer-cancel').length, 1, 'the step went out once');
});

test('a cancel that cannot be written answers 503 and changes nothing; picking the run up again does not send its step a second time while it is out', async () => {
  const org = 'acct-stalled-cancel';
  const key = await setup(org, '/cancel');
  const release = await sendHeld(org, key, '/cancel', 'held');
  const [runId] = [...(await runStates(org, key)).keys()];

  failNext = (run) => run.value === 'cancelled' && run.context.orgId === org;
  const cancel = await call(rt.url, 'POST', `/organizations/${org}/runs/${runId}/cancel`, { token: key });
  assert.equal(cancel.status, 503, cancel.text);
  assert.equal(cancel.body.error.code, 'write_failed');
  assert.equal((await runStates(org, key)).get(runId!), 'running', 'nothing was changed');

  assert.equal(resumeDue(), 1, 'the run is picked up again');
  release();
  await eventually('the run to complete with its one request', () => runStates(org, key), (s) => s.get(runId!) === 'completed');
  assert.equal(receiver.received.filter((r) => r.path === '/cancel').length, 1, 'the step went out once');
});

test('a resume of a failed run that cannot be written answers 503; picked up again, the run waits for a person and is no longer stalled', async () => {
  const org = 'acct-stalled-resume';
  const key = await setup(org, '/resume');
  receiver.script([{ status: 400 }]);
  await send(org, key, 'rejected');
  const [runId] = await eventually('the run to fail', async () => [...(await runStates(org, key))].filter(([, state]) => state === 'failed').map(([id]) => id), (ids) => ids.length === 1);

  failNext = (run, previous) => previous?.value === 'failed' && run.context.orgId === org;
  const resumed = await call(rt.url, 'POST', `/organizations/${org}/runs/${runId}/resume`, { token: key });
  assert.equal(resumed.status, 503, resumed.text);
  assert.equal(resumed.body.error.code, 'write_failed');
  const runKey = `${org}\u0000${runId}`;
  assert.equal(rt.runtime.engine.stalled.has(runKey), true);
  assert.equal(resumeDue(), 1);
  await eventually('the stalled entry to clear', () => rt.runtime.engine.stalled.has(runKey), (stalled) => !stalled);
  assert.equal((await runStates(org, key)).get(runId!), 'failed', 'still waiting for a person');

  receiver.script([{ status: 200 }]);
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/runs/${runId}/resume`, { token: key })).status, 202, 'a later resume works');
  await eventually('the run to complete', () => runStates(org, key), (s) => s.get(runId!) === 'completed');
});

test('a dispatch whose reads fail stalls the run instead of ending the process, and it runs once picked up', async () => {
  const org = 'acct-stalled-dispatch';
  const key = await setup(org, '/dispatch');
  receiver.script([{ status: 200 }]);
  const events = rt.runtime.context.events;
  // The dispatch reads its event with getRecord (the payload as text).
  const getRecord = events.getRecord.bind(events);
  let failReads = true;
  events.getRecord = (orgId, eventId) => {
    if (failReads && orgId === org) throw new Error('EIO: read failed');
    return getRecord(orgId, eventId);
  };
  try {
    await send(org, key, 'unreadable');
    const [runId] = [...(await runStates(org, key)).keys()];
    await eventually('the run to stall', () => rt.runtime.engine.stalled.has(`${org}\u0000${runId}`), (stalled) => stalled);
    assert.equal(receiver.received.filter((r) => r.path === '/dispatch').length, 0);
    failReads = false;
    assert.equal(resumeDue(), 1);
    await eventually('the run to complete', () => runStates(org, key), (s) => s.get(runId!) === 'completed');
    assert.equal(receiver.received.filter((r) => r.path === '/dispatch').length, 1);
  } finally {
    events.getRecord = getRecord;
  }
});

test('a cancel that cannot be written on a run waiting for its timer is no longer stalled once picked up again, and the timer still fires', async () => {
  const org = 'acct-stalled-waiting';
  const key = await createOrg(rt.url, ADMIN_TOKEN, org);
  const wf = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'nap', trigger_event: 'nap.start', steps: [{ id: 'nap', type: 'delay', duration: 'PT1H' }] } });
  assert.equal(wf.status, 201, wf.text);
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'nap.start', payload: {}, id: 'nap-1' } })).status, 202);
  const [runId] = await eventually('the run to wait', async () => [...(await runStates(org, key))].filter(([, state]) => state === 'delaying').map(([id]) => id), (ids) => ids.length === 1);
  const runKey = `${org}\u0000${runId}`;

  failNext = (run) => run.value === 'cancelled' && run.context.orgId === org;
  const cancel = await call(rt.url, 'POST', `/organizations/${org}/runs/${runId}/cancel`, { token: key });
  assert.equal(cancel.status, 503, cancel.text);
  assert.equal(rt.runtime.engine.stalled.has(runKey), true);
  assert.equal(resumeDue(), 1);
  await eventually('the stalled entry to clear', () => rt.runtime.engine.stalled.has(runKey), (stalled) => !stalled);
  assert.doesNotMatch((await call(rt.url, 'GET', '/metrics')).text, /^sluice_runs_stalled [1-9]/m);
  assert.equal((await runStates(org, key)).get(runId!), 'delaying', 'still waiting: the cancel was never written');

  clock.advance(60 * 60 * 1000);
  rt.runtime.engine.timers.fireDue();
  await eventually('the run to complete after its delay', () => runStates(org, key), (s) => s.get(runId!) === 'completed');
});

/** Makes the next read of `runId` through the run store fail once (EIO), whoever reads it. */
function failNextReadOf(runId: string): () => boolean {
  const runs = rt.runtime.context.runs;
  const { has, get } = runs;
  let failed = false;
  const fail = (id: string): void => {
    if (failed || id !== runId) return;
    failed = true;
    runs.has = has;
    runs.get = get;
    throw new Error('EIO: read failed');
  };
  runs.has = (orgId, id) => (fail(id), has.call(runs, orgId, id));
  runs.get = (orgId, id) => (fail(id), get.call(runs, orgId, id));
  return () => failed;
}

const runOf = async (org: string, key: string, eventId: string): Promise<string> => {
  const reactions = await eventually('the event\'s run', async () => (await call(rt.url, 'GET', `/organizations/${org}/events/${eventId}`, { token: key })).body.reactions as Array<{ run_id: string }>, (r) => r?.length === 1);
  return reactions[0]!.run_id;
};

test('a step answer whose run cannot be read is kept: the run stalls, then completes without sending the step again, and the org\'s next run goes on', async () => {
  const org = 'acct-unread-report';
  const key = await setup(org, '/unread-report');
  const release = await sendHeld(org, key, '/unread-report', 'first');
  const first = await runOf(org, key, 'first');
  await send(org, key, 'second');
  const readFailed = failNextReadOf(first);
  release();
  await eventually('the run to stall', () => rt.runtime.engine.stalled.has(`${org}\u0000${first}`), Boolean);
  assert.equal(readFailed(), true);
  assert.equal(resumeDue(), 1);
  await eventually('both runs to complete', () => runStates(org, key), (s) => [...s.values()].every((state) => state === 'completed') && s.size === 2);
  assert.equal(receiver.received.filter((r) => r.path === '/unread-report').length, 2, 'one request per run: the answer was kept, not asked for again');
});

test('an admission whose run cannot be read gives back its slot once picked up again, and the run is admitted', async () => {
  const org = 'acct-unread-admit';
  const key = await setup(org, '/unread-admit');
  const release = await sendHeld(org, key, '/unread-admit', 'first');
  await send(org, key, 'second');
  const second = await runOf(org, key, 'second');
  failNextReadOf(second);
  release();
  await eventually('the queued run to stall', () => rt.runtime.engine.stalled.has(`${org}\u0000${second}`), Boolean);
  assert.equal(resumeDue(), 1);
  await eventually('the second run to complete', () => runStates(org, key), (s) => s.get(second) === 'completed');
});

/** A new org whose one run waits in a 1 s delay (its timer armed) before a webhook step to `path`. */
async function delayingRun(org: string, path: string): Promise<{ key: string; runId: string }> {
  const key = await createOrg(rt.url, ADMIN_TOKEN, org);
  const wf = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'w', trigger_event: 'job.run', steps: [{ id: 'wait', type: 'delay', duration_ms: 1000 }, { id: 's', type: 'webhook', url: `${receiver.url}${path}` }] } });
  assert.equal(wf.status, 201, wf.text);
  receiver.script([{ status: 200 }]);
  await send(org, key, 'only');
  const runId = await runOf(org, key, 'only');
  await eventually('the delay', () => runStates(org, key), (s) => s.get(runId) === 'delaying');
  // The state is visible once written, a moment before the engine arms the timer.
  await eventually('the delay timer', () => rt.runtime.engine.timerDueAt(org, runId), (due) => due !== undefined);
  return { key, runId };
}

test('a timer that fired for a run that cannot be read stalls the run; picked up again, its timer is armed again and the run goes on', async () => {
  const org = 'acct-unread-timer';
  const { key, runId } = await delayingRun(org, '/unread-timer');
  failNextReadOf(runId);
  clock.advance(1000);
  assert.equal(rt.runtime.engine.timers.fireDue(), 1);
  await eventually('the run to stall', () => rt.runtime.engine.stalled.has(`${org}\u0000${runId}`), Boolean);
  // Picked up again, its timer is armed again; being due already, it fires at once.
  assert.equal(resumeDue(), 1);
  await eventually('the run to complete', () => runStates(org, key), (s) => s.get(runId) === 'completed');
  assert.equal(receiver.received.filter((r) => r.path === '/unread-timer').length, 1);
});

test('a run stalled with its step\'s answer unwritten stalls no more once its org is deleted', async () => {
  const org = 'acct-stalled-deleted';
  const key = await setup(org, '/deleted');
  const release = await sendHeld(org, key, '/deleted', 'gone');
  const before = failed.length;
  failNext = (run, previous) => run.context.orgId === org && previous?.value === 'running';
  release();
  await eventually('the report write to fail', () => failed.length, (n) => n === before + 1);
  const stalledKey = `${org}\u0000${failed[before]!}`;
  await eventually('the run to stall', () => rt.runtime.engine.stalled.has(stalledKey), Boolean);
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${org}`, { token: ADMIN_TOKEN })).status, 202);
  assert.equal(rt.runtime.engine.stalled.has(stalledKey), false, 'the deletion let go of the stall');
  assert.equal(resumeDue(), 0, 'nothing is picked up again');
  await rt.runtime.deletions.idle();
  assert.equal(receiver.received.filter((r) => r.path === '/deleted').length, 1);
});

test('a delay whose completion cannot be written, failing again as soon as it is picked up, waits twice as long the second time', async () => {
  const org = 'acct-delay-doubling';
  const { key, runId } = await delayingRun(org, '/delay-doubling');
  const stalledKey = `${org}\u0000${runId}`;
  const pauseLeft = (): number | undefined => {
    const due = rt.runtime.engine.stalled.timers.dueAt(stalledKey);
    return due === undefined ? undefined : due - clock.now();
  };
  failNext = (run) => run.context.runId === runId;
  clock.advance(1000);
  assert.equal(rt.runtime.engine.timers.fireDue(), 1);
  assert.equal(await eventually('the run to stall', pauseLeft, (left) => left !== undefined), FIRST_RETRY_MS);
  // Picked up again: its timer, due already, fires at once, and the write fails again.
  failNext = (run) => run.context.runId === runId;
  assert.equal(resumeDue(), 1);
  assert.equal(await eventually('the run to stall again', pauseLeft, (left) => left !== undefined), 2 * FIRST_RETRY_MS);
  clock.advance(FIRST_RETRY_MS);
  assert.equal(resumeDue(), 1);
  await eventually('the run to complete', () => runStates(org, key), (s) => s.get(runId) === 'completed');
  assert.equal(receiver.received.filter((r) => r.path === '/delay-doubling').length, 1);
});
