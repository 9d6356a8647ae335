// /metrics counts runs and their step attempts as the engine writes them (runs created, finished
// by state, attempts by step type and outcome) and shows the runs holding a concurrency slot and
// waiting for one, through a real runtime whose webhook steps reach a local receiver.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
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
