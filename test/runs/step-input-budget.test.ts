// The step input budget: steps whose payloads do not fit wait in order before they read their
// event, so large events with slow receivers cannot fill the heap; the budget itself, then a
// runtime holding 1 MB payloads to it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StepInputBudget } from '../../runtime/runs/step-input-budget.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';

test('the budget grants in order, never past its total, and lets an oversized payload run alone', async () => {
  const budget = new StepInputBudget(100);
  assert.equal(budget.tryTake(60), true);
  assert.equal(budget.tryTake(50), false, 'does not fit');
  const granted: string[] = [];
  const big = budget.take(80).then(() => granted.push('big'));
  assert.equal(budget.tryTake(10), false, 'fits, but a step waits before it');
  const small = budget.take(10).then(() => granted.push('small'));
  assert.deepEqual(budget.stats(), { heldBytes: 60, waiting: 2 });
  budget.release(60);
  await Promise.all([big, small]);
  assert.deepEqual(granted, ['big', 'small'], 'first come, first served');
  assert.deepEqual(budget.stats(), { heldBytes: 90, waiting: 0 });
  budget.release(80);
  budget.release(10);
  const huge = budget.take(1_000);
  await huge;
  assert.deepEqual(budget.stats(), { heldBytes: 100, waiting: 0 }, 'larger than the total: takes all of it');
  assert.equal(budget.tryTake(1), false);
  budget.release(1_000);
  assert.deepEqual(budget.stats(), { heldBytes: 0, waiting: 0 });
});

test('a runtime with --step-input-mib 4 holds at most four 1 MB payloads in steps at once; the rest wait and then complete', async () => {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const receiver = await startReceiver([{ status: 200, after: held }]);
  const rt = await startRuntime({ args: ['--step-input-mib', '4'] });
  try {
    const org = 'acct-big-payloads';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 20 } })).status, 200);
    const wf = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'w', trigger_event: 'big', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/big` }] } });
    assert.equal(wf.status, 201, wf.text);
    const blob = 'x'.repeat(1_000_000);
    for (let i = 0; i < 10; i++) {
      const sent = await call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'big', id: `big-${i}`, payload: { i, blob } } });
      assert.equal(sent.status, 202, sent.text);
    }
    const metric = async (name: string): Promise<number> => {
      const text = (await call(rt.url, 'GET', '/metrics', { token: ADMIN_TOKEN })).text;
      return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
    };
    await eventually('six steps wait for the budget', () => metric('sluice_steps_waiting_for_memory'), (n) => n === 6);
    // All ten runs are admitted (limit 20, 32 connections per receiver): only the budget holds six back.
    assert.equal(receiver.received.length, 4, 'four 1,000,0xx-byte payloads fit in 4 MiB');
    assert.ok((await metric('sluice_step_input_bytes')) > 4_000_000);
    release();
    await eventually('all ten delivered', () => receiver.received.length, (n) => n === 10, 20_000);
    const indexes = receiver.received.map((r) => (JSON.parse(r.body) as { event: { payload: { i: number } } }).event.payload.i);
    assert.deepEqual([...indexes].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 'each payload delivered once');
    await eventually('the budget is empty again', () => metric('sluice_step_input_bytes'), (n) => n === 0);
  } finally {
    release();
    await rt.close();
    await receiver.close();
  }
});
