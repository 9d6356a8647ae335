// The derived-event budget for steps in flight together: a place counts until its event is stored
// (not until the flush that follows: counted twice meanwhile, a valid step was refused), a step
// whose event is stored already needs none, and a place let go frees the room. A completion whose
// write failed is checked again when it is written after the pause (on a real runtime and runner).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { DerivedBudget } from '../../runtime/runs/derived-budget.ts';
import { FIRST_RETRY_MS } from '../../runtime/runs/stalled-runs.ts';
import { uploadApproved } from '../actions/action-fixtures.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

test('places count until their events are stored, then the count on disk has them', () => {
  let derived = 998;
  const stored = new Set<string>();
  const budget = new DerivedBudget(1000, { derivedSoFar: () => derived, eventStored: (_org, id) => stored.has(id) });
  const a = budget.hold('org', 'root', 'evt_a');
  const b = budget.hold('org', 'root', 'evt_b');
  const c = budget.hold('org', 'root', 'evt_c');
  assert.equal(a.take(), true);
  assert.equal(b.take(), true, 'the last place');
  assert.equal(c.take(), false, '998 stored + 2 in flight');
  // A commits: its event and the count are visible, its flush still under way (a not released yet).
  stored.add('evt_a');
  derived = 999;
  assert.equal(c.take(), false, 'b still holds the last place');
  b.release(); // b's step failed to be written
  assert.equal(c.take(), true, 'a counted once (on disk), not twice');
  a.release();
  assert.equal(budget.hold('org', 'root', 'evt_d').take(), false, '999 + c');
  assert.equal(budget.hold('org', 'other-root', 'evt_e').take(), true, 'another root has its own budget');
});

test('a step whose derived event is stored already (it ran before a crash) takes no place and is never refused', () => {
  const budget = new DerivedBudget(1000, { derivedSoFar: () => 1000, eventStored: (_org, id) => id === 'evt_done' });
  assert.equal(budget.hold('org', 'root', 'evt_done').take(), true);
  assert.equal(budget.hold('org', 'root', 'evt_new').take(), false);
});

test('a completion whose write failed takes a place again when written after the pause: a budget filled meanwhile fails the step, nothing derived', { timeout: 60_000 }, async () => {
  const clock = new ManualClock(Date.UTC(2026, 11, 3, 9, 0, 0));
  const rt = await startRuntime({ clock, args: ['--runner', 'child'] });
  try {
    const org = 'acct-derived-resume';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    const post = (path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: key, json });
    const wasm = await assembleWat('sink', constantWat(JSON.stringify({ derived_event: { type: 'sink', payload: {} } })));
    const actionId = await uploadApproved(rt.url, org, key, 'sink', wasm);
    assert.equal((await post('/workflows', { name: 'derive', trigger_event: 'root', steps: [{ id: 'a', type: 'custom_action', action_id: actionId }] })).status, 201);

    // The root's count as stored, plus events derived from it elsewhere (999: one place left).
    const events = rt.runtime.context.events;
    const storedCount = events.derivedCount.bind(events);
    let elsewhere = 999;
    events.derivedCount = (orgId, rootEventId) => storedCount(orgId, rootEventId) + elsewhere;
    // The step's completion (its derived event with it) fails to be written once.
    const runs = rt.runtime.context.runs;
    const write = runs.write.bind(runs);
    let failures = 0;
    runs.write = (run, previous) => {
      if (failures === 0 && run.value === 'completed') {
        failures += 1;
        throw new Error('ENOSPC: no space left on device');
      }
      write(run, previous);
    };
    assert.equal((await post('/events', { type: 'root', id: 'root-1', payload: {} })).status, 202);
    await eventually('the completion write to fail', () => failures, (n) => n === 1);
    // Its pause is armed after the failed write, from the clock's reading then: wait for it before advancing.
    const pauses = rt.runtime.engine.stalled.timers;
    await eventually('the stalled run\'s pause to be armed', () => pauses.size, (n) => n === 1);
    // Meanwhile the root's last place is taken by an event derived elsewhere.
    elsewhere = 1000;
    // The first pick-up cannot read the run's event (the disk that failed the write): the kept
    // completion stays kept for the next, and the step is not sent again.
    const getRecord = events.getRecord.bind(events);
    let failedReads = 0;
    events.getRecord = (orgId, eventId) => {
      if (failedReads === 0 && eventId === 'root-1') {
        failedReads += 1;
        throw new Error('EIO: i/o error');
      }
      return getRecord(orgId, eventId);
    };
    clock.advance(FIRST_RETRY_MS);
    rt.runtime.engine.stalled.timers.fireDue();
    await eventually('the first pick-up\'s read to fail', () => failedReads, (n) => n === 1);
    await eventually('the doubled pause to be armed', () => pauses.size, (n) => n === 1);
    // Its failure doubled the pause.
    clock.advance(2 * FIRST_RETRY_MS);
    rt.runtime.engine.stalled.timers.fireDue();
    const [reaction] = (await call(rt.url, 'GET', `/organizations/${org}/events/root-1`, { token: key })).body.reactions;
    const run = await eventually('the run to end', async () => (await call(rt.url, 'GET', `/organizations/${org}/runs/${reaction.run_id}`, { token: key })).body.run, (r) => r.state === 'failed' || r.state === 'completed');
    assert.deepEqual([run.state, run.error?.code, failedReads], ['failed', 'derived_event_budget_exceeded', 1]);
    assert.deepEqual(run.steps[0].attempts.map((a: { evidence: { replayed: boolean } }) => a.evidence.replayed), [false], 'one attempt, its answer the one kept: the action was not invoked again');
    assert.equal(storedCount(org, 'root-1'), 0, 'no event was derived past the budget');
    assert.deepEqual((await call(rt.url, 'GET', `/organizations/${org}/events?type=sink`, { token: key })).body.events, []);
  } finally {
    await rt.close();
  }
});
