// A running run whose step results pass the runtime's limit keeps no live actor between its
// transitions (held-results.ts): it rests as its durable snapshot, and goes on from it unchanged.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { asStepId } from '../../actors/ids.ts';
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
  for (const [trigger, first, environment] of [['order.heavy', big, 'production'], ['order.light', small, 'production'], ['order.heavy', big, 'sandbox']] as const) {
    const steps = [
      { id: 'first', type: 'webhook', url: first.url },
      { id: 'held', type: 'webhook', url: held.url },
      { id: 'last', type: 'webhook', url: last.url },
    ];
    const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: trigger, trigger_event: trigger, environment, steps } });
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

async function runOf(eventId: string, environment = 'production'): Promise<{ run_id: string; state: string }> {
  const runs = (await call(rt.url, 'GET', `/organizations/${ORG}/runs?limit=100&environment=${environment}`, { token: key })).body.runs as Array<{ run_id: string; state: string; event_id: string }>;
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

// Found by review: a sandbox reset that removed a resting run while the write of its step's answer
// was being flushed (both in one flush) let it go, and the engine, going on from that write, made
// its resting entry again: its next webhook was then taken as still wanted, and sent.
test('a run a sandbox reset removes while its answer is written does not rest again, and sends nothing more', async () => {
  const { engine, context, ledger } = rt.runtime;
  const store = context.runs;
  const write = store.write.bind(store);
  let removed: string | undefined;
  // As a reset's chunk does (remove, then forget once durable), but in the very write of the run's
  // second answer, so that the forget comes before the engine goes on from that write.
  store.write = (run, previous) => {
    write(run, previous);
    if (removed === undefined && run.context.environment === 'sandbox' && run.context.currentIndex === 2) {
      removed = run.context.runId;
      store.remove(run);
      engine.forget([run]);
    }
  };
  try {
    const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.heavy', environment: 'sandbox', payload: {}, id: 'evt_rest_reset_1' } });
    assert.equal(sent.status, 202, sent.text);
    const runId = await eventually('the run removed in the write of its second answer', () => removed, (id) => id !== undefined);
    await ledger.root.flushed;
    for (let turn = 0; turn < 5; turn++) await nextTurn();
    assert.equal(store.get(ORG, runId!), undefined, 'the run is gone');
    assert.equal(await restingRuns(), 0, 'no resting entry is made again for the removed run');
    assert.equal(last.received.filter((r) => JSON.parse(r.body).run.id === runId).length, 0, 'its last step was not sent');
  } finally {
    store.write = write;
  }
});

test('a command a resting run refuses leaves it resting', async () => {
  let releaseAgain: () => void = () => undefined;
  held.script([{ status: 200, body: '{"held":2}', after: new Promise<void>((resolve) => (releaseAgain = resolve)) }]);
  const heldBefore = held.received.length;
  try {
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.heavy', payload: {}, id: 'evt_rest_refused_1' } })).status, 202);
    await eventually('the run at its held step', () => held.received.length, (n) => n === heldBefore + 1);
    assert.equal(await restingRuns(), 1);
    const { run_id: runId } = await runOf('evt_rest_refused_1');
    const fence = rt.runtime.context.runs.get(ORG, runId)!.context.fence;
    // A late answer of the first step's attempt, under its older fence: the run refuses it.
    await rt.runtime.engine.send(ORG, runId, { type: 'step.failed', stepId: asStepId('first'), fence: fence - 1, error: { code: 'late', message: 'a late answer', retryable: true } });
    assert.equal(rt.runtime.context.runs.get(ORG, runId)!.context.fence, fence, 'refused: nothing changed');
    assert.equal(await restingRuns(), 1, 'read back for the command only, it rests again');
  } finally {
    releaseAgain();
  }
  await eventually('the run completed', () => runOf('evt_rest_refused_1'), (run) => run.state === 'completed');
  assert.equal(await restingRuns(), 0);
});
