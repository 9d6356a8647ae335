// A running run whose step results pass the runtime's limit keeps no live actor between its
// transitions (held-results.ts): it rests as its durable snapshot, and goes on from it unchanged.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-resting-runs';
/** A first answer of 300 characters: its result passes the test's limit of 100; `{}` stays below it. */
const BIG_BODY = JSON.stringify({ note: 'x'.repeat(290) });
let rt: TestRuntime;
let key: string;
let big: Receiver;
let small: Receiver;
let held: Receiver;
let last: Receiver;
let release: () => void = () => undefined;

before(async () => {
  rt = await startRuntime({ restingResultBytes: 100 });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  big = await startReceiver([{ status: 200, body: BIG_BODY }]);
  small = await startReceiver([{ status: 200, body: '{}' }]);
  held = await startReceiver([{ status: 200, body: '{"held":1}', after: new Promise<void>((resolve) => (release = resolve)) }]);
  last = await startReceiver([{ status: 200, body: '{}' }]);
  for (const [trigger, first] of [['order.heavy', big], ['order.light', small]] as const) {
    const steps = [
      { id: 'first', type: 'webhook', url: first.url },
      { id: 'held', type: 'webhook', url: held.url },
      { id: 'last', type: 'webhook', url: last.url },
    ];
    const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: trigger, trigger_event: trigger, steps } });
    assert.equal(made.status, 201, made.text);
  }
});
after(async () => {
  release();
  await rt.close();
  await Promise.all([big, small, held, last].map((receiver) => receiver.close()));
});

const restingRuns = async (): Promise<number> => {
  const text = (await call(rt.url, 'GET', '/metrics', { token: ADMIN_TOKEN })).text;
  return Number(/^sluice_runs_resting (\d+)/m.exec(text)?.[1] ?? NaN);
};

async function runOf(eventId: string): Promise<{ run_id: string; state: string }> {
  const runs = (await call(rt.url, 'GET', `/organizations/${ORG}/runs?limit=100`, { token: key })).body.runs as Array<{ run_id: string; state: string; event_id: string }>;
  const run = runs.find((r) => r.event_id === eventId);
  assert.ok(run !== undefined, `a run for ${eventId}`);
  return run;
}

test('runs holding more step results than the limit rest between transitions, are cancelled and complete from their snapshot unchanged', async () => {
  const events = [['evt_rest_heavy_1', 'order.heavy'], ['evt_rest_heavy_2', 'order.heavy'], ['evt_rest_light_1', 'order.light']] as const;
  for (const [id, type] of events) {
    const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type, payload: { id }, id } });
    assert.equal(sent.status, 202, sent.text);
  }
  await eventually('each run at its held second step', () => held.received.length, (n) => n === 3);
  // The light run's first result ({"status":200,"body":"{}"}) stays under the limit: it keeps its actor.
  assert.equal(await restingRuns(), 2, 'the two runs holding the 300-character answer rest; the light one stays live');

  const cancelled = await runOf('evt_rest_heavy_2');
  const answer = await call(rt.url, 'POST', `/organizations/${ORG}/runs/${cancelled.run_id}/cancel`, { token: key });
  assert.equal(answer.status, 200, answer.text);
  assert.equal(answer.body.run.state, 'cancelled');
  assert.equal(await restingRuns(), 1, 'a cancelled run no longer rests as running');

  release();
  const heavy = await runOf('evt_rest_heavy_1');
  await eventually('the heavy run completed', () => runOf('evt_rest_heavy_1'), (run) => run.state === 'completed');
  await eventually('the light run completed', () => runOf('evt_rest_light_1'), (run) => run.state === 'completed');
  assert.equal(await restingRuns(), 0);

  // The last step's body carries every earlier result, read from the durable snapshot in full.
  const lastBody = last.received.map((r) => JSON.parse(r.body) as { run: { id: string }; results: Record<string, { status: number; body: string }> }).find((b) => b.run.id === heavy.run_id);
  assert.ok(lastBody !== undefined, 'the heavy run sent its last step');
  assert.deepEqual(lastBody.results, { first: { status: 200, body: BIG_BODY }, held: { status: 200, body: '{"held":1}' } });
  const view = (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${heavy.run_id}`, { token: key })).body.run;
  assert.deepEqual(view.steps.map((s: { result: unknown }) => s.result), [{ status: 200, body: BIG_BODY }, { status: 200, body: '{"held":1}' }, { status: 200, body: '{}' }]);
  assert.equal(last.received.filter((r) => JSON.parse(r.body).run.id === cancelled.run_id).length, 0, 'the cancelled run sent nothing after its cancel');
});
