// The budget of runs the schedule ticker's writes in flight may create together: ticks go in the
// order they came, as many as fit; one larger than the budget goes alone; ticks that start no run
// wait their turn too (their write would be batched with the others'). And with a real runtime:
// schedules whose ticks fan out to several workflows each all send, their writes never holding more
// than the budget's runs at once.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { TickRunsGate } from '../../runtime/triggers/tick-runs-gate.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

test('ticks take runs in the order they came; one larger than the budget goes alone', async () => {
  const gate = new TickRunsGate(10);
  const granted: string[] = [];
  const take = (name: string, runs: number): Promise<void> => gate.take(runs).then(() => void granted.push(name));
  await take('a', 6);
  const waiting = [take('b', 6), take('c', 0), take('d', 25), take('e', 4)];
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(granted, ['a'], 'b does not fit beside a; c and the others wait behind it');
  gate.give(6);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(granted, ['a', 'b', 'c']);
  gate.give(6);
  gate.give(0);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(granted, ['a', 'b', 'c', 'd'], 'past the budget, alone');
  assert.deepEqual(gate.stats(), { held: 25, waiting: 1 });
  gate.give(25);
  await Promise.all(waiting);
  assert.deepEqual(granted, ['a', 'b', 'c', 'd', 'e']);
  gate.give(4);
  assert.deepEqual(gate.stats(), { held: 0, waiting: 0 });
});

test('schedules ticking together, each starting three runs, all send; their writes hold at most the budget\'s runs at once', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 2, 9, 0, 30));
  const gate = new TickRunsGate(7);
  let most = 0;
  const take = gate.take.bind(gate);
  gate.take = async (runs: number) => {
    await take(runs);
    most = Math.max(most, gate.stats().held);
  };
  const rt = await startRuntime({ args: ['--runner', 'off'], clock, tickRuns: gate });
  try {
    const org = 'acct-tick-fanout';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    const post = (path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: key, json });
    for (let n = 0; n < 3; n++) assert.equal((await post('/workflows', { name: `w${n}`, trigger_event: 'tick.event', steps: [{ type: 'delay', duration_ms: 3_600_000 }] })).status, 201);
    for (let n = 0; n < 10; n++) assert.equal((await post('/schedules', { name: `s${n}`, cron: '* * * * *', event_type: 'tick.event' })).status, 201);
    clock.advance(60_000);
    rt.runtime.ticker.timers.fireDue();
    await rt.runtime.ticker.idle();
    const events = await eventually('the ticks stored', async () => (await call(rt.url, 'GET', `/organizations/${org}/events?limit=50`, { token: key })).body.events as unknown[], (found) => found.length === 10);
    assert.equal(events.length, 10);
    const runs = (await call(rt.url, 'GET', `/organizations/${org}/runs?limit=100`, { token: key })).body.runs as unknown[];
    assert.equal(runs.length, 30);
    assert.equal(most, 6, 'two ticks of three runs at a time');
  } finally {
    await rt.close();
  }
});

test('a sandbox tick waits out its org\'s reset holding none of the budget: another org\'s tick goes meanwhile', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 2, 9, 0, 30));
  const gate = new TickRunsGate(4);
  const rt = await startRuntime({ args: ['--runner', 'off'], clock, tickRuns: gate });
  let endReset: () => void = () => undefined;
  try {
    const keys = new Map<string, string>();
    for (const org of ['acct-resetting', 'acct-other-tick']) keys.set(org, await createOrg(rt.url, ADMIN_TOKEN, org));
    const post = (org: string, path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: keys.get(org)!, json });
    // The resetting org's sandbox tick takes the whole budget (4 runs); the other org's takes 1.
    for (let n = 0; n < 4; n++) assert.equal((await post('acct-resetting', '/workflows', { environment: 'sandbox', name: `w${n}`, trigger_event: 'tick', steps: [{ type: 'delay', duration_ms: 3_600_000 }] })).status, 201);
    assert.equal((await post('acct-resetting', '/schedules', { name: 'sandboxed', cron: '* * * * *', event_type: 'tick', environment: 'sandbox' })).status, 201);
    assert.equal((await post('acct-other-tick', '/workflows', { name: 'w', trigger_event: 'tick', steps: [{ type: 'delay', duration_ms: 3_600_000 }] })).status, 201);
    assert.equal((await post('acct-other-tick', '/schedules', { name: 'plain', cron: '* * * * *', event_type: 'tick' })).status, 201);
    // A reset of the first org's sandbox in flight (a big sandbox, or resets one after another).
    const reset = rt.runtime.context.runs.sandboxGenerations.during('acct-resetting', () => new Promise<void>((done) => (endReset = done)));
    clock.advance(60_000);
    rt.runtime.ticker.timers.fireDue();
    const events = (org: string, environment: string) => async () => ((await call(rt.url, 'GET', `/organizations/${org}/events?environment=${environment}&limit=10`, { token: keys.get(org)! })).body.events as unknown[]).length;
    await eventually('the other org\'s tick stored while the reset goes on', events('acct-other-tick', 'production'), (count) => count === 1);
    assert.equal(await events('acct-resetting', 'sandbox')(), 0, 'the sandbox tick waits for the reset');
    endReset();
    await reset;
    await eventually('the sandbox tick stored after the reset', events('acct-resetting', 'sandbox'), (count) => count === 1);
  } finally {
    endReset();
    await rt.close();
  }
});
