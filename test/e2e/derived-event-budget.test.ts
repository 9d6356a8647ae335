// Derived events from one root event share a budget: depth alone bounds a chain, not its width,
// and a workflow whose steps each derive its own trigger would otherwise double (or triple) per level.
// A business replay of the root is a new root with a budget of its own.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MAX_DERIVED_PER_ROOT } from '../../runtime/runs/custom-action-step.ts';
import { upload } from '../actions/action-fixtures.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-fanout';
let workflowId: string;
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime({ args: ['--runner', 'child'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
});
after(async () => rt.close());

test(`one root event's descendants stop at ${MAX_DERIVED_PER_ROOT} derived events; further steps fail naming the budget`, { timeout: 180_000 }, async () => {
  const wasm = await assembleWat('boom', constantWat(JSON.stringify({ derived_event: { type: 'boom', payload: {} } })));
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name: 'boom', file: wasm });
  assert.equal(uploaded.status, 201, uploaded.text);
  const actionId = (uploaded.body as { custom_action: { id: string } }).custom_action.id;
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${actionId}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  // Three steps that each derive the workflow's own trigger: 3^8 events by depth alone.
  const steps = ['a', 'b', 'c'].map((id) => ({ id, type: 'custom_action', action_id: actionId }));
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'boom', trigger_event: 'boom', steps } });
  assert.equal(created.status, 201);
  workflowId = created.body.workflow.id;
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'boom', payload: {}, id: 'root-1' } })).status, 202);

  const unfinished = async (): Promise<number> => {
    let total = 0;
    for (const state of ['queued', 'running', 'backoff']) total += (await call(rt.url, 'GET', `/organizations/${ORG}/runs?state=${state}&limit=500`, { token: key })).body.runs.length;
    return total;
  };
  await eventually('the fan-out to settle', unfinished, (n) => n === 0, 150_000);
  // Exactly: steps whose output came in while the last ones were being written hold their places (derived-budget.ts).
  assert.equal(rt.runtime.context.events.derivedCount(ORG, 'root-1'), MAX_DERIVED_PER_ROOT);
  const failed = (await call(rt.url, 'GET', `/organizations/${ORG}/runs?state=failed&limit=500`, { token: key })).body.runs as Array<{ error: { code: string } }>;
  assert.ok(failed.some((run) => run.error.code === 'derived_event_budget_exceeded'), 'runs past the budget fail naming it');
});

test('a replay of a root whose budget is spent derives again: it counts against a budget of its own', { timeout: 60_000 }, async () => {
  // One step now, deriving an event nobody listens to, so the replay derives exactly one.
  const wasm = await assembleWat('sink', constantWat(JSON.stringify({ derived_event: { type: 'sink', payload: {} } })));
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name: 'sink', file: wasm });
  const actionId = (uploaded.body as { custom_action: { id: string } }).custom_action.id;
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${actionId}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  const steps = [{ id: 'a', type: 'custom_action', action_id: actionId }];
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${ORG}/workflows/${workflowId}`, { token: key, json: { steps } })).status, 200);

  const replay = await call(rt.url, 'POST', `/organizations/${ORG}/events/root-1/replay`, { token: key, json: { side_effects: 'skip' } });
  assert.equal(replay.status, 202, replay.text);
  const replayId = replay.body.event.id as string;
  const runs = await eventually(
    'the replay\'s run to finish',
    async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${replayId}`, { token: key })).body.reactions as Array<{ state: string; run_id: string }>,
    (list) => list.length === 1 && (list[0]!.state === 'completed' || list[0]!.state === 'failed'),
  );
  const run = (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runs[0]!.run_id}`, { token: key })).body.run;
  assert.equal(run.state, 'completed', JSON.stringify(run.error));
  assert.equal(rt.runtime.context.events.derivedCount(ORG, replayId), 1);
});

test('runs of one root whose actions answer together cannot pass the budget: with one place left, one derives and the rest fail', { timeout: 60_000 }, async () => {
  const wasm = await assembleWat('leaf', constantWat(JSON.stringify({ derived_event: { type: 'leaf.noop', payload: {} } })));
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name: 'leaf', file: wasm });
  const actionId = (uploaded.body as { custom_action: { id: string } }).custom_action.id;
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${actionId}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${ORG}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 8 } })).status, 200);
  for (let i = 0; i < 8; i++) {
    const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: `fan-${i}`, trigger_event: 'fan.out', steps: [{ id: 'act', type: 'custom_action', action_id: actionId }] } });
    assert.equal(made.status, 201, made.text);
  }
  // The root's budget used all but one place, as earlier generations would have.
  const { ledger, events } = rt.runtime.context;
  await durably(ledger.root, ledger.root.transaction(() => {
    for (let i = 1; i < MAX_DERIVED_PER_ROOT; i++) events.countDerivedWithin(ORG, 'fan-root');
  }));
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'fan.out', payload: {}, id: 'fan-root' } })).status, 202);
  const reactions = await eventually(
    'the eight runs to finish',
    async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/fan-root`, { token: key })).body.reactions as Array<{ state: string; error: { code: string } | null }>,
    (list) => list.length === 8 && list.every((r) => r.state === 'completed' || r.state === 'failed'),
    30_000,
  );
  assert.equal(reactions.filter((r) => r.state === 'completed').length, 1);
  assert.deepEqual([...new Set(reactions.filter((r) => r.state === 'failed').map((r) => r.error?.code))], ['derived_event_budget_exceeded']);
  assert.equal(events.derivedCount(ORG, 'fan-root'), MAX_DERIVED_PER_ROOT);
});
