// The output contract inside runs: a reserved key of the wrong shape fails the step naming the field
// (visible in the event's reactions), a misspelled key is plain data, an entity-less projection row
// is appended once per step, and a derived event that re-triggers its own workflow stops at depth 8.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { upload } from '../actions/action-fixtures.ts';
import { eventually } from '../helpers/receiver.ts';

const ORG = 'acct-contract';
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime({ args: ['--runner', 'child'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => rt.close());

/** Uploads and approves a module that always outputs `output`, wired to a workflow on `trigger`. */
async function actionWorkflow(name: string, output: unknown, trigger: string): Promise<void> {
  const wasm = await assembleWat(name, constantWat(JSON.stringify(output)));
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name, file: wasm });
  assert.equal(uploaded.status, 201, uploaded.text);
  const id = (uploaded.body as { custom_action: { id: string } }).custom_action.id;
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${id}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: trigger, steps: [{ id: 'act', type: 'custom_action', action_id: id }] } });
  assert.equal(wf.status, 201, wf.text);
}

async function settledReactions(eventId: string) {
  return eventually(`reactions of ${eventId}`, async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key })).body.reactions as Array<{ state: string; error: { code: string; message: string } | null }>, (r) => r.length === 1 && ['completed', 'failed'].includes(r[0]!.state));
}

async function send(type: string, id: string): Promise<string> {
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type, payload: {}, id } })).status, 202);
  return id;
}

test('a workflow naming a custom action that does not exist is refused at write time', async () => {
  const answer = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, {
    token: key,
    json: { name: 'ghost', trigger_event: 'contract.ghost', steps: [{ type: 'delay', duration_ms: 5 }, { type: 'custom_action', action_id: 'act_doesnotexist00' }] },
  });
  assert.equal(answer.status, 422);
  assert.equal(answer.body.error.code, 'unknown_custom_action');
  assert.equal(answer.body.error.field, 'steps[1].action_id');
});

test('a reserved key of the wrong shape fails the step, naming the field in the reactions', async () => {
  await actionWorkflow('bad-shape', { projection: { name: 'risk', entity_type: 'Not Valid', entity_id: 'x' } }, 'contract.bad');
  const [reaction] = await settledReactions(await send('contract.bad', 'bad-1'));
  assert.equal(reaction!.state, 'failed');
  assert.equal(reaction!.error!.code, 'invalid_action_output');
  assert.match(reaction!.error!.message, /projection\.entity_type/);
  await actionWorkflow('half-key', { projection: { name: 'risk', entity_id: 'x' } }, 'contract.half');
  const [half] = await settledReactions(await send('contract.half', 'half-1'));
  assert.match(half!.error!.message, /projection\.entity_type/);
});

test('a misspelled key is ordinary data; an entity-less projection is appended once per step', async () => {
  await actionWorkflow('typo', { projecton: { name: 'x' }, note: 'kept' }, 'contract.typo');
  const [typo] = await settledReactions(await send('contract.typo', 'typo-1'));
  assert.equal(typo!.state, 'completed');
  await actionWorkflow('log', { projection: { name: 'audit_log', title: 'seen', data: { n: 1 } } }, 'contract.log');
  await settledReactions(await send('contract.log', 'log-1'));
  await settledReactions(await send('contract.log', 'log-2'));
  const rows = await call(rt.url, 'GET', `/organizations/${ORG}/projections/audit_log`, { token: key });
  assert.equal(rows.body.rows.length, 2, 'one appended row per step');
  assert.ok(rows.body.rows.every((r: { entity_type: null; title: string }) => r.entity_type === null && r.title === 'seen'));
  const first = await call(rt.url, 'GET', `/organizations/${ORG}/projections/audit_log?limit=1`, { token: key });
  assert.equal(first.body.rows.length, 1);
  assert.ok(first.body.next_cursor !== null, 'a full page points to the next one');
  const second = await call(rt.url, 'GET', `/organizations/${ORG}/projections/audit_log?limit=1&cursor=${first.body.next_cursor}`, { token: key });
  assert.equal(second.body.rows.length, 1);
  assert.notEqual(second.body.rows[0].run_id, first.body.rows[0].run_id, 'the second page continues after the first');
  const byStatus = await call(rt.url, 'GET', `/organizations/${ORG}/projections/audit_log?status=held`, { token: key });
  assert.equal(byStatus.body.rows.length, 0, 'no row has that status');
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/projections/audit_log?cursor=junk`, { token: key })).status, 400);
});

test('a derived event that re-triggers its own workflow stops at depth 8', async () => {
  await actionWorkflow('looper', { derived_event: { type: 'contract.loop', payload: { again: true } } }, 'contract.loop');
  await send('contract.loop', 'loop-0');
  const events = await eventually('the loop to stop', async () => {
    const list = (await call(rt.url, 'GET', `/organizations/${ORG}/events?type=contract.loop&limit=50`, { token: key })).body.events as Array<{ id: string; depth: number }>;
    const deepest = list.find((e) => e.depth === 8);
    const failed = deepest === undefined ? [] : (await call(rt.url, 'GET', `/organizations/${ORG}/events/${deepest.id}`, { token: key })).body.reactions;
    return { list, failed };
  }, ({ failed }) => failed.length === 1 && failed[0].state === 'failed');
  assert.equal(events.list.length, 9, 'the root and eight derived generations');
  assert.deepEqual(events.list.map((e) => e.depth).sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  assert.equal(events.failed[0].error.code, 'derived_event_depth_exceeded');
});
