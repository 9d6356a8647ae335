// /metrics counts runs and their step attempts as the engine writes them (runs created, finished
// by state, attempts by step type and outcome) and shows the runs holding a concurrency slot and
// waiting for one, through a real runtime whose webhook steps reach a local receiver: runs whose
// creating write committed but did not flush count as created, and an attempt that reports after
// its run was cancelled counts as an attempt.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { FIRST_RETRY_MS } from '../../runtime/runs/stalled-runs.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { failNextEventFlush } from '../helpers/unflushed-event.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-run-metrics';

/** The value of one series of the scrape (0 when absent). */
async function series(url: string, name: string): Promise<number> {
  const text = (await call(url, 'GET', '/metrics')).text;
  const line = text.split('\n').find((entry) => entry.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.slice(name.length + 1));
}

test('runs created and finished, step attempts by type and outcome, and runs running and queued', { timeout: 60_000 }, async () => {
  let answer = (): void => undefined;
  const held = new Promise<void>((resolve) => (answer = resolve));
  // The first request is held (its run keeps the org's one slot), then every answer is 200; the
  // "refused" receiver answers 400, which fails its run at once.
  const receiver = await startReceiver([{ status: 200, after: held }, { status: 200 }]);
  const refusing = await startReceiver([{ status: 400 }]);
  const rt = await startRuntime();
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${ORG}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 1 } })).status, 200);
    const workflow = (name: string, event: string, url: string) => call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: event, steps: [{ id: 'send', type: 'webhook', url }] } });
    assert.equal((await workflow('ok', 'order.paid', `${receiver.url}/ok`)).status, 201);
    assert.equal((await workflow('refused', 'order.refused', `${refusing.url}/no`)).status, 201);
    assert.equal(await series(rt.url, 'sluice_runs_finished_total{state="failed",environment="production"}'), 0, 'there from the start');

    for (let i = 0; i < 3; i++) assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.paid', payload: { i } } })).status, 202);
    await eventually('one run in the slot, two waiting', async () => [await series(rt.url, 'sluice_runs_running'), await series(rt.url, 'sluice_runs_queued')], ([running, queued]) => running === 1 && queued === 2);
    answer();
    await eventually('the three completed', () => series(rt.url, 'sluice_runs_finished_total{state="completed",environment="production"}'), (count) => count === 3);
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.refused', payload: {} } })).status, 202);
    await eventually('the refused one failed', () => series(rt.url, 'sluice_runs_finished_total{state="failed",environment="production"}'), (count) => count === 1);

    assert.equal(await series(rt.url, 'sluice_runs_created_total{environment="production"}'), 4);
    assert.equal(await series(rt.url, 'sluice_step_attempts_total{type="webhook",outcome="succeeded"}'), 3);
    assert.equal(await series(rt.url, 'sluice_step_attempts_total{type="webhook",outcome="failed"}'), 1);
    assert.equal(await series(rt.url, 'sluice_runs_running'), 0, 'drained');
    assert.equal(await series(rt.url, 'sluice_runs_queued'), 0);
  } finally {
    answer();
    await rt.close();
    await receiver.close();
    await refusing.close();
  }
});

test('runs whose creating write committed but did not flush are counted as created once they are picked up; an attempt reported after its run was cancelled is counted', { timeout: 60_000 }, async () => {
  const clock = new ManualClock(Date.UTC(2026, 11, 7, 9, 0, 0));
  let answer = (): void => undefined;
  const held = new Promise<void>((resolve) => (answer = resolve));
  const receiver = await startReceiver([{ status: 200 }]);
  const slow = await startReceiver([{ status: 200, after: held }]);
  const rt = await startRuntime({ clock });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    for (const [name, event, url] of [['one', 'job.run', receiver.url], ['two', 'job.run', receiver.url], ['slow', 'job.slow', slow.url]]) {
      assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: event, steps: [{ id: 'send', type: 'webhook', url: `${url}/${name}` }] } })).status, 201);
    }
    // The event and its two runs commit, and their flush fails: the request is refused, the runs are picked up later.
    failNextEventFlush(rt.runtime.ledger, ORG);
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'job.run', payload: {}, id: 'unflushed-1' } })).status, 500);
    clock.advance(FIRST_RETRY_MS);
    rt.runtime.engine.stalled.timers.fireDue();
    await eventually('both completed', () => series(rt.url, 'sluice_runs_finished_total{state="completed",environment="production"}'), (count) => count === 2);
    assert.equal(await series(rt.url, 'sluice_runs_created_total{environment="production"}'), 2, 'as many created as finished');

    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'job.slow', payload: {} } })).status, 202);
    await eventually('its request out', () => slow.received.length, (count) => count === 1);
    const runs = (await call(rt.url, 'GET', `/organizations/${ORG}/runs`, { token: key })).body.runs as Array<{ run_id: string; state: string }>;
    const running = runs.find((run) => run.state === 'running')!;
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/runs/${running.run_id}/cancel`, { token: key })).status, 200);
    await eventually('cancelled', () => series(rt.url, 'sluice_runs_finished_total{state="cancelled",environment="production"}'), (count) => count === 1);
    const before = await series(rt.url, 'sluice_step_attempts_total{type="webhook",outcome="succeeded"}');
    answer();
    await eventually('the late answer counted', () => series(rt.url, 'sluice_step_attempts_total{type="webhook",outcome="succeeded"}'), (count) => count === before + 1);
  } finally {
    answer();
    await rt.close();
    await receiver.close();
    await slow.close();
  }
});

test('a replay without side effects counts its skipped webhook attempts and its finish, admitted as it is created or after waiting for a slot', { timeout: 60_000 }, async () => {
  let answer = (): void => undefined;
  const held = new Promise<void>((resolve) => (answer = resolve));
  // The first original sends both steps at once; the second is held at its first, keeping the slot.
  const receiver = await startReceiver([{ status: 200 }, { status: 200 }, { status: 200, after: held }, { status: 200 }]);
  const rt = await startRuntime();
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'two sends', trigger_event: 'order.paid', steps: [{ id: 'a', type: 'webhook', url: `${receiver.url}/a` }, { id: 'b', type: 'webhook', url: `${receiver.url}/b` }] } })).status, 201);
    const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.paid', payload: {}, id: 'paid-1' } });
    assert.equal(sent.status, 202, sent.text);
    await eventually('the original completed', () => series(rt.url, 'sluice_runs_finished_total{state="completed",environment="production"}'), (count) => count === 1);
    const replay = () => call(rt.url, 'POST', `/organizations/${ORG}/events/paid-1/replay`, { token: key, json: { side_effects: 'skip', again: true } });

    // A free slot: the replay's run is admitted, skips both steps and completes in the write that creates it.
    assert.equal((await replay()).status, 202);
    assert.equal(await series(rt.url, 'sluice_runs_created_total{environment="production"}'), 2);
    assert.equal(await series(rt.url, 'sluice_runs_finished_total{state="completed",environment="production"}'), 2, 'its finish counts');
    assert.equal(await series(rt.url, 'sluice_step_attempts_total{type="webhook",outcome="skipped"}'), 2, 'each skipped attempt counts once');

    // The org's one slot is held: the replay's run waits, then skips and completes on its admission.
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${ORG}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 1 } })).status, 200);
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.paid', payload: {}, id: 'paid-2' } })).status, 202);
    await eventually('the second original holds the slot', () => series(rt.url, 'sluice_runs_running'), (running) => running === 1);
    assert.equal((await replay()).status, 202);
    await eventually('the replay waits', () => series(rt.url, 'sluice_runs_queued'), (queued) => queued === 1);
    answer();
    await eventually('all four completed', () => series(rt.url, 'sluice_runs_finished_total{state="completed",environment="production"}'), (count) => count === 4);
    assert.equal(await series(rt.url, 'sluice_runs_created_total{environment="production"}'), 4);
    assert.equal(await series(rt.url, 'sluice_step_attempts_total{type="webhook",outcome="skipped"}'), 4);
    assert.equal(await series(rt.url, 'sluice_step_attempts_total{type="webhook",outcome="succeeded"}'), 4, 'the two originals sent both steps');
  } finally {
    answer();
    await rt.close();
    await receiver.close();
  }
});
