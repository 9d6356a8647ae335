// The step input budget: steps whose payloads do not fit wait before they read their event, so
// large events with slow receivers cannot fill the heap, and tenants take turns, so one tenant's
// cannot hold back another's; the budget itself, then a runtime holding 1 MB payloads to it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EventRecord } from '../../runtime/events/event-codec.ts';
import type { EventStore } from '../../runtime/events/event-store.ts';
import { StepInputBudget } from '../../runtime/runs/step-input-budget.ts';
import { NOTHING_ELSE, withStepInput } from '../../runtime/runs/step-input.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, type CallResult } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { buildModules, uploadApproved } from '../actions/action-fixtures.ts';
import { assembleWat } from '../helpers/hook-runner-wat.ts';

test('the budget grants in order within a tenant, never past the total or a tenant\'s share, and lets an oversized payload run alone', async () => {
  const budget = new StepInputBudget(100, 60);
  assert.equal(budget.tryTake('a', 50), true);
  assert.equal(budget.tryTake('a', 20), false, 'past a\'s share of 60');
  const granted: string[] = [];
  const a2 = budget.take('a', 20).then(() => granted.push('a2'));
  assert.equal(budget.tryTake('a', 1), false, 'fits, but a\'s step waits before it');
  assert.equal(budget.tryTake('b', 40), true, 'another tenant is not held back by a\'s queue');
  const b2 = budget.take('b', 30).then(() => granted.push('b2'));
  assert.deepEqual(budget.stats(), { heldBytes: 90, waiting: 2 });
  budget.release('a', 50);
  await a2;
  assert.deepEqual(granted, ['a2'], 'b2 needs 30 and only 30 are free once a2 took its 20');
  budget.release('b', 40);
  await b2;
  assert.deepEqual(granted, ['a2', 'b2']);
  assert.deepEqual(budget.stats(), { heldBytes: 50, waiting: 0 });
  budget.release('a', 20);
  budget.release('b', 30);
  await budget.take('c', 80);
  assert.deepEqual(budget.stats(), { heldBytes: 80, waiting: 0 }, 'larger than a share: takes the whole share, and its whole size of the total');
  assert.equal(budget.tryTake('c', 1), false);
  assert.equal(budget.tryTake('d', 20), true);
  assert.equal(budget.tryTake('e', 1), false, 'the total is spent');
  budget.release('c', 80);
  budget.release('d', 20);
  await budget.take('f', 1_000);
  assert.deepEqual(budget.stats(), { heldBytes: 100, waiting: 0 }, 'larger than the total: runs alone');
  assert.equal(budget.tryTake('g', 1), false);
  budget.release('f', 1_000);
  assert.deepEqual(budget.stats(), { heldBytes: 0, waiting: 0 });
});

test('a step that hands its input on to something still running (a webhook body still being sent) keeps its bytes taken until that ends', async () => {
  const budget = new StepInputBudget(100, 100);
  const event = { payload_json: 'x'.repeat(40) } as EventRecord;
  const events = { getRecord: () => event } as unknown as EventStore;
  let sent: () => void = () => undefined;
  const sending = new Promise<void>((resolve) => (sent = resolve));
  const outcome = await withStepInput(budget, events, 'a', 'evt_1', NOTHING_ELSE, async (_event, hold) => {
    hold(sending);
    return 'answered';
  });
  assert.equal(outcome, 'answered', 'the step ends with its answer, not with the sending');
  assert.deepEqual(budget.stats(), { heldBytes: 40, waiting: 0 }, 'the body still being sent holds the payload');
  sent();
  await eventually('the bytes back', () => budget.stats().heldBytes, (held) => held === 0);
  await withStepInput(budget, events, 'a', 'evt_1', NOTHING_ELSE, async () => undefined);
  assert.deepEqual(budget.stats(), { heldBytes: 0, waiting: 0 }, 'a step that holds nothing gives its bytes back at its end');
});

test('payloads larger than a share count their size against the total: eight tenants cannot hold eight shares\' worth each', async () => {
  const mib = 1024 * 1024;
  const budget = new StepInputBudget(16 * mib);
  const granted = Array.from({ length: 8 }, (_, i) => budget.tryTake(`org-${i}`, 8 * mib));
  assert.deepEqual(granted.filter(Boolean).length, 2, '16 MiB hold two 8 MiB payloads');
  assert.deepEqual(budget.stats(), { heldBytes: 16 * mib, waiting: 0 });
  const third = budget.take('org-2', 8 * mib);
  budget.release('org-0', 8 * mib);
  await third;
  assert.deepEqual(budget.stats(), { heldBytes: 16 * mib, waiting: 0 });
});

test('a step that has to wait for its bytes lets go of what it holds besides its event first (a webhook step\'s prior results); one that need not wait keeps it', async () => {
  const budget = new StepInputBudget(100, 100);
  const event = { payload_json: 'x'.repeat(40) } as EventRecord;
  const events = { getRecord: () => event } as unknown as EventStore;
  const order: string[] = [];
  const alsoHeld = { bytes: 30, letGo: () => void order.push('let go') };
  await withStepInput(budget, events, 'a', 'evt_1', alsoHeld, async () => void order.push('ran'));
  assert.deepEqual(order, ['ran'], 'room at once: nothing let go');

  assert.equal(budget.tryTake('a', 60), true);
  const waiting = withStepInput(budget, events, 'a', 'evt_1', alsoHeld, async (seen) => void order.push(`ran with the event ${seen === undefined ? 'unread' : 'read again'}`));
  assert.deepEqual(budget.stats(), { heldBytes: 60, waiting: 1 }, '40 + 30 bytes do not fit beside 60');
  assert.deepEqual(order, ['ran', 'let go'], 'let go before the wait');
  budget.release('a', 60);
  await waiting;
  assert.deepEqual(order, ['ran', 'let go', 'ran with the event read again']);
  assert.deepEqual(budget.stats(), { heldBytes: 0, waiting: 0 });
});

test('a waiting step whose signal aborts leaves the queue at once, taking nothing, and the steps behind it go on', async () => {
  const budget = new StepInputBudget(100, 60);
  assert.equal(budget.tryTake('a', 50), true);
  const withdrawn = new AbortController();
  const big = budget.take('a', 40, withdrawn.signal);
  let smallTaken = false;
  const small = budget.take('a', 10).then((taken) => (smallTaken = taken));
  assert.deepEqual(budget.stats(), { heldBytes: 50, waiting: 2 });
  withdrawn.abort();
  assert.equal(await big, false);
  assert.equal(await small, true, 'the step behind it fits once it is gone');
  assert.equal(smallTaken, true);
  assert.deepEqual(budget.stats(), { heldBytes: 60, waiting: 0 });
  assert.equal(await budget.take('a', 1, AbortSignal.abort()), false, 'withdrawn before it waits: nothing taken');
  budget.release('a', 50);
  budget.release('a', 10);
  assert.deepEqual(budget.stats(), { heldBytes: 0, waiting: 0 });
});

test('tenants waiting take turns as bytes come back', async () => {
  const budget = new StepInputBudget(10, 10);
  assert.equal(budget.tryTake('a', 10), true);
  const order: string[] = [];
  const waits = [budget.take('a', 5).then(() => order.push('a1')), budget.take('a', 5).then(() => order.push('a2')), budget.take('b', 5).then(() => order.push('b1'))];
  budget.release('a', 10);
  await Promise.all(waits.slice(0, 2));
  assert.deepEqual(order, ['a1', 'a2'], 'a was first in turn and both of its fit');
  budget.release('a', 5);
  await waits[2];
  assert.deepEqual(order, ['a1', 'a2', 'b1']);
});

test('a step waiting for the total alone is next: other tenants\' small steps, each fitting the bytes just freed, do not keep it waiting', async () => {
  const budget = new StepInputBudget(100, 50);
  const out: string[] = [];
  for (let i = 0; i < 5; i++) {
    for (const tenant of ['b', 'c']) {
      assert.equal(budget.tryTake(tenant, 10), true);
      out.push(tenant);
    }
  }
  let granted = false;
  const large = budget.take('a', 40).then(() => (granted = true));
  assert.equal(budget.tryTake('d', 10), false, 'a tenant with nothing waiting waits behind it too');
  const d = budget.take('d', 10);
  // b and c keep steps coming: each one that ends is followed by another.
  for (let ends = 0; ends < 4; ends++) {
    const tenant = out.shift() as string;
    budget.release(tenant, 10);
    await Promise.resolve();
    assert.equal(budget.tryTake(tenant, 10), false, `the ${ends + 1}. freed 10 bytes wait for a's 40`);
  }
  await large;
  assert.equal(granted, true);
  assert.deepEqual(budget.stats(), { heldBytes: 100, waiting: 1 }, '60 still out and a\'s 40; d waits its turn');
  budget.release('a', 40);
  await d;
  assert.equal(budget.tryTake('b', 10), true, 'nothing waits for the total: takes go through again');
  // A tenant held back by its own share holds no one back.
  const shares = new StepInputBudget(100, 30);
  assert.equal(shares.tryTake('a', 30), true);
  const second = shares.take('a', 10);
  assert.equal(shares.tryTake('b', 30), true, 'a waits for its share, not for the total');
  shares.release('a', 30);
  await second;
});

test('a runtime with --step-input-mib 8 holds one org\'s 1 MB payloads to its share (an eighth) while another org\'s steps go on', async () => {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const receiver = await startReceiver([{ status: 200, after: held }]);
  const rt = await startRuntime({ args: ['--step-input-mib', '8'] });
  try {
    const big = 'acct-big-payloads';
    const small = 'acct-small-payloads';
    const keys: Record<string, string> = {};
    for (const org of [big, small]) {
      keys[org] = await createOrg(rt.url, ADMIN_TOKEN, org);
      assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 20 } })).status, 200);
      const wf = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: keys[org]!, json: { name: 'w', trigger_event: 'e', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/${org}` }] } });
      assert.equal(wf.status, 201, wf.text);
    }
    // 1 MB of 3-byte characters (340,000 of them): the budget counts bytes, so two do not fit a share.
    const blob = '\u4e2d'.repeat(340_000);
    for (let i = 0; i < 6; i++) {
      const sent = await call(rt.url, 'POST', `/organizations/${big}/events`, { token: keys[big]!, json: { type: 'e', id: `big-${i}`, payload: { i, blob } } });
      assert.equal(sent.status, 202, sent.text);
    }
    const metric = async (name: string): Promise<number> => {
      const text = (await call(rt.url, 'GET', '/metrics', { token: ADMIN_TOKEN })).text;
      return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
    };
    await eventually('five of the big org\'s steps wait for the budget', () => metric('sluice_steps_waiting_for_memory'), (n) => n === 5);
    // All six runs are admitted (limit 20, 32 connections per receiver): only the budget holds five back.
    assert.equal(receiver.received.filter((r) => r.path === `/${big}`).length, 1, 'a 1 MB payload takes the org\'s whole 1 MiB share');
    for (let i = 0; i < 3; i++) {
      assert.equal((await call(rt.url, 'POST', `/organizations/${small}/events`, { token: keys[small]!, json: { type: 'e', id: `small-${i}`, payload: { i } } })).status, 202);
    }
    await eventually('the other org\'s steps are not held back', () => receiver.received.filter((r) => r.path === `/${small}`).length, (n) => n === 3);
    release();
    await eventually('all delivered', () => receiver.received.length, (n) => n === 9, 20_000);
    const bigOnes = receiver.received.filter((r) => r.path === `/${big}`).map((r) => (JSON.parse(r.body) as { event: { payload: { i: number } } }).event.payload.i);
    assert.deepEqual([...bigOnes].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5], 'each payload delivered once');
    await eventually('the budget is empty again', () => metric('sluice_step_input_bytes'), (n) => n === 0);
  } finally {
    release();
    await rt.close();
    await receiver.close();
  }
});

/**
 * A receiver that holds its answers until `release`, a runtime with the child hook-runner and a
 * 1 MiB step input budget (an org's share: 128 KiB), and `org` on it with the echo action uploaded.
 */
async function withHeldReceiver(org: string, body: (setup: { rt: TestRuntime; receiver: Receiver; key: string; actionId: string; release: () => void; post: (path: string, json: unknown) => Promise<CallResult>; metric: (name: string) => Promise<number> }) => Promise<void>): Promise<void> {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const receiver = await startReceiver([{ status: 200, after: held }]);
  const rt = await startRuntime({ args: ['--runner', 'child', '--step-input-mib', '1'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    const post = (path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: key, json });
    const actionId = await uploadApproved(rt.url, org, key, 'echo', (await buildModules()).echo);
    const metric = async (name: string): Promise<number> => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec((await call(rt.url, 'GET', '/metrics', { token: ADMIN_TOKEN })).text)?.[1] ?? Number.NaN);
    await body({ rt, receiver, key, actionId, release, post, metric });
  } finally {
    release();
    await rt.close();
    await receiver.close();
  }
}

test('a custom action step cancelled while it waits for the budget leaves the queue at once and does not run its guest (custom_action_withdrawn)', () =>
  withHeldReceiver('acct-withdrawn-action', async ({ rt, receiver, key, actionId, release, post, metric }) => {
    const org = 'acct-withdrawn-action';
    assert.equal((await post('/workflows', { name: 'hold', trigger_event: 'hold', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/hold` }] })).status, 201);
    assert.equal((await post('/workflows', { name: 'act', trigger_event: 'act', steps: [{ id: 'a', type: 'custom_action', action_id: actionId }] })).status, 201);
    const blob = 'x'.repeat(200 * 1024);
    assert.equal((await post('/events', { type: 'hold', id: 'hold-1', payload: { blob } })).status, 202);
    await eventually('the held webhook out', () => receiver.received.length, (n) => n === 1);
    assert.equal((await post('/events', { type: 'act', id: 'act-1', payload: { blob } })).status, 202);
    await eventually('the action step waits for the budget (the org\'s 128 KiB share is held)', () => metric('sluice_steps_waiting_for_memory'), (n) => n === 1);
    const [reaction] = (await call(rt.url, 'GET', `/organizations/${org}/events/act-1`, { token: key })).body.reactions;
    const runPath = `/organizations/${org}/runs/${reaction.run_id}`;
    assert.equal((await post(`/runs/${reaction.run_id}/cancel`, {})).status, 200);
    // While the held webhook still holds the org's share: the withdrawn step does not wait for it.
    const run = await eventually('the withdrawn attempt recorded', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run, (r) => r.steps[0].attempts[0].after_cancel !== null);
    assert.equal(await metric('sluice_steps_waiting_for_memory'), 0);
    release();
    const late = run.steps[0].attempts[0].after_cancel;
    assert.deepEqual({ state: run.state, outcome: late.outcome, code: late.error?.code, started: late.started_at, ran: late.evidence?.fuel_used }, { state: 'cancelled', outcome: 'failed', code: 'custom_action_withdrawn', started: null, ran: undefined });
    assert.match(late.error.message, /while the step waited for memory to read its event/);
    await eventually('the budget is empty again', () => metric('sluice_step_input_bytes'), (n) => n === 0);
  }));

test('a webhook step counts the earlier steps\' results its body carries: a 50 KB event after two actions echoing it takes the org\'s whole share', () =>
  withHeldReceiver('acct-carried-results', async ({ receiver, actionId, release, post, metric }) => {
    const echo = (id: string) => ({ id, type: 'custom_action', action_id: actionId });
    assert.equal((await post('/workflows', { name: 'carry', trigger_event: 'carry', steps: [echo('a1'), echo('a2'), { id: 'w', type: 'webhook', url: `${receiver.url}/carry` }] })).status, 201);
    assert.equal((await post('/workflows', { name: 'plain', trigger_event: 'plain', steps: [{ id: 'w', type: 'webhook', url: `${receiver.url}/plain` }] })).status, 201);
    assert.equal((await post('/events', { type: 'carry', id: 'carry-1', payload: { blob: 'x'.repeat(50 * 1024) } })).status, 202);
    await eventually('the carrying webhook out (held)', () => receiver.received.length, (n) => n === 1);
    const body = JSON.parse(receiver.received[0]!.body) as { event: { payload: unknown }; results: Record<string, unknown> };
    assert.deepEqual(Object.keys(body.results), ['a1', 'a2']);
    const carried = Buffer.byteLength(JSON.stringify(body.event.payload)) + Buffer.byteLength(JSON.stringify(body.results));
    assert.ok(carried > 150 * 1024, `payload and two echoes: ${carried} bytes`);
    assert.equal(await metric('sluice_step_input_bytes'), carried, 'the payload and the results the body carries');
    // Past the org's 128 KiB share, so the step took all of it: a small step of the same org waits.
    assert.equal((await post('/events', { type: 'plain', id: 'plain-1', payload: { small: true } })).status, 202);
    await eventually('the small step waits for the share', () => metric('sluice_steps_waiting_for_memory'), (n) => n === 1);
    assert.equal(receiver.received.length, 1);
    release();
    await eventually('both delivered', () => receiver.received.length, (n) => n === 2);
    await eventually('the budget is empty again', () => metric('sluice_step_input_bytes'), (n) => n === 0);
  }));

test('a webhook step that waited for its share sends the earlier steps\' results whole (read again from the run once it has its bytes)', () =>
  withHeldReceiver('acct-waited-results', async ({ rt, receiver, key, release, post, metric }) => {
    const org = 'acct-waited-results';
    // An action answering 100 KB: two of them make a body past the org's 128 KiB share, so the
    // webhook step after them takes the whole share and waits while any step of the org holds bytes.
    const output = JSON.stringify({ note: 'z'.repeat(100 * 1024) });
    const big = await uploadApproved(rt.url, org, key, 'big', await assembleWat('big', `(module (memory (export "memory") 3) (data (i32.const 16) "${[...Buffer.from(output)].map((b) => `\\${b.toString(16).padStart(2, '0')}`).join('')}\\00") (func (export "execute") (param i32 i32) (result i32) (i32.const 16)))`));
    const act = (id: string) => ({ id, type: 'custom_action', action_id: big });
    assert.equal((await post('/workflows', { name: 'hold', trigger_event: 'hold', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/hold` }] })).status, 201);
    assert.equal((await post('/workflows', { name: 'carry', trigger_event: 'carry', steps: [act('a1'), act('a2'), { id: 'w', type: 'webhook', url: `${receiver.url}/carry` }] })).status, 201);
    assert.equal((await post('/events', { type: 'hold', id: 'hold-1', payload: { small: true } })).status, 202);
    await eventually('a small webhook of the org out (held)', () => receiver.received.length, (n) => n === 1);
    assert.equal((await post('/events', { type: 'carry', id: 'carry-1', payload: { n: 1 } })).status, 202);
    await eventually('the carrying webhook step waits for the share', () => metric('sluice_steps_waiting_for_memory'), (n) => n === 1);
    release();
    await eventually('both delivered', () => receiver.received.length, (n) => n === 2);
    const body = JSON.parse(receiver.received.find((r) => r.path === '/carry')!.body) as { results: Record<string, unknown> };
    assert.deepEqual(body.results, { a1: JSON.parse(output), a2: JSON.parse(output) });
    await eventually('the budget is empty again', () => metric('sluice_step_input_bytes'), (n) => n === 0);
  }));
