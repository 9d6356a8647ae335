// The custom-actions flow end to end: build order-risk-scorer from source, upload it over HTTP,
// set its secret, approve it, and let a signed webhook drive a custom_action step whose projection
// and derived event (which triggers a second workflow) commit with the step.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';

const ORG = 'acct-shop';
const SECRET = `whsec_${Buffer.alloc(32, 11).toString('base64')}`;
let rt: TestRuntime;
let key: string;
let receiver: Receiver;
let scorer: Buffer;
const buildDir = mkdtempSync(join(tmpdir(), 'sluice-kit-'));

before(async () => {
  const root = resolve(import.meta.dirname, '../..');
  const built = spawnSync(process.execPath, [join(root, 'kits/build.mjs'), '--out', buildDir, 'assemblyscript'], { encoding: 'utf8' });
  assert.equal(built.status, 0, `building the AssemblyScript kit failed:\n${built.stderr}`);
  scorer = readFileSync(join(buildDir, 'order-risk-scorer-assemblyscript.wasm'));
  rt = await startRuntime({ args: ['--runner', 'child'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  receiver = await startReceiver();
  const source = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'shop', secrets: [SECRET] } });
  assert.equal(source.status, 201);
});
after(async () => {
  await rt.close();
  await receiver.close();
  rmSync(buildDir, { recursive: true, force: true });
});

async function upload(name: string, module: Buffer, permissions: string): Promise<{ status: number; body: any }> {
  const form = new FormData();
  form.set('name', name);
  form.set('permissions', permissions);
  form.set('file', new Blob([module]), 'action.wasm');
  const response = await fetch(`${rt.url}/organizations/${ORG}/custom-actions`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  return { status: response.status, body: await response.json() };
}

function deliver(id: string, order: Record<string, unknown>) {
  const body = JSON.stringify({ type: 'orders.created', ...order });
  return call(rt.url, 'POST', `/hooks/${ORG}/shop`, { body, headers: signStandard(SECRET, id, Math.floor(Date.now() / 1000), body) });
}

async function runOf(runId: string) {
  return (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: key })).body.run;
}

test('webhook -> approved scorer -> projection + derived event -> second workflow; a re-sent order updates its row', async () => {
  const uploaded = await upload('order-risk-scorer', scorer, 'read_secret:RISK_THRESHOLD');
  assert.equal(uploaded.status, 201, JSON.stringify(uploaded.body));
  const action = uploaded.body.custom_action;
  assert.equal(action.versions[0].status, 'pending_review');
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${action.id}/secrets`, { token: key, json: { key: 'RISK_THRESHOLD', value: '50' } })).status, 204);
  const review = await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${action.id}/review`, { token: key, json: { status: 'approved', version: 1 } });
  assert.equal(review.status, 200, review.text);

  const scoring = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'score', trigger_event: 'orders.created', steps: [{ id: 'score', type: 'custom_action', action_id: action.id }] } });
  assert.equal(scoring.status, 201, scoring.text);
  const notify = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'notify', trigger_event: 'orders.risk_scored', steps: [{ id: 'tell', type: 'webhook', url: `${receiver.url}/scored` }] } });
  assert.equal(notify.status, 201);

  const order = { order_id: 'ord_1001', amount_cents: 120000, billing: { country: 'DE' }, shipping: { country: 'US' }, items: [{ sku: 'a', quantity: 2 }], customer: { new: true } };
  const first = await deliver('msg-1', order);
  assert.equal(first.status, 204, first.text);
  const eventId = first.headers.get('sluice-event-id')!;

  const reactions = await eventually('scoring run completed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key })).body.reactions, (r) => r.length === 1 && r[0].state === 'completed');
  const scoreRun = await runOf(reactions[0].run_id);
  const result = scoreRun.steps[0].result;
  assert.equal(result.projection.status, 'held_for_review');
  assert.equal(result.projection.data.threshold, 50, 'the declared secret reached the action');
  assert.equal(scoreRun.steps[0].attempts[0].evidence.digest, action.versions[0].digest);

  const row = await call(rt.url, 'GET', `/organizations/${ORG}/projections/order_risk/order/ord_1001`, { token: key });
  assert.equal(row.status, 200, row.text);
  assert.equal(row.body.row.status, 'held_for_review');
  assert.equal(row.body.row.revision, 1);

  const derived = await eventually('derived event', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events?type=orders.risk_scored`, { token: key })).body.events, (e) => e.length === 1);
  assert.equal(derived[0].causation_id, scoreRun.run_id);
  assert.equal(derived[0].correlation_id, eventId);
  assert.equal(derived[0].depth, 1);
  assert.equal(derived[0].payload.order_id, 'ord_1001');
  const second = await eventually('second run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${derived[0].id}`, { token: key })).body.reactions, (r) => r.length === 1 && r[0].state === 'completed');
  assert.equal(second[0].workflow_id, notify.body.workflow.id);
  const told = receiver.received.find((r) => r.path === '/scored');
  assert.equal(JSON.parse(told!.body).event.payload.order_id, 'ord_1001');

  const resent = await deliver('msg-2', { ...order, amount_cents: 1000, customer: { new: false }, shipping: { country: 'DE' } });
  assert.equal(resent.status, 204);
  await eventually('row updated', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/projections/order_risk/order/ord_1001`, { token: key })).body.row, (r) => r.revision === 2);
  const rows = await call(rt.url, 'GET', `/organizations/${ORG}/projections/order_risk?entity_type=order`, { token: key });
  assert.equal(rows.body.rows.length, 1, 're-processing the same order updates one row');
  assert.equal(rows.body.rows[0].status, 'approved');
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/projections/order_risk?status=approved`, { token: key })).body.rows.length, 1);
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/projections/order_risk?status=held_for_review`, { token: key })).body.rows.length, 0);
});

test('an unapproved action fails closed and its event lands in failed events', async () => {
  const pending = await upload('pending-scorer', scorer, '');
  assert.equal(pending.status, 201);
  await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'unapproved', trigger_event: 'orders.unapproved', steps: [{ type: 'custom_action', action_id: pending.body.custom_action.id }] } });
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'orders.unapproved', payload: { order_id: 'x' }, id: 'unapproved-1' } });
  assert.equal(sent.status, 202);
  const reactions = await eventually('failed run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/unapproved-1`, { token: key })).body.reactions, (r) => r.length === 1 && r[0].state === 'failed');
  assert.equal(reactions[0].error.code, 'custom_action_not_approved');
  assert.match(reactions[0].error.message, /latest is pending_review\); an admin must approve it\.$/);
  const failed = await call(rt.url, 'GET', `/organizations/${ORG}/failed-events`, { token: key });
  assert.ok(failed.body.failed_events.some((f: { event: { id: string } }) => f.event.id === 'unapproved-1'));
});

test('a payload the action rejects fails the run at once, saying so in one sentence', async () => {
  const picky = await upload('picky-scorer', scorer, '');
  const id = picky.body.custom_action.id;
  await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${id}/review`, { token: key, json: { status: 'approved', version: 1 } });
  await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'picky', trigger_event: 'orders.unreadable', steps: [{ id: 'score', type: 'custom_action', action_id: id }] } });
  await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'orders.unreadable', payload: { no_order_id: 1 }, id: 'unreadable-1' } });
  const reactions = await eventually('rejected run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/unreadable-1`, { token: key })).body.reactions, (r) => r.length === 1 && r[0].state === 'failed');
  const error = (await runOf(reactions[0].run_id)).error;
  assert.equal(error.code, 'action_rejected_payload');
  assert.equal(error.message, "The action rejected the payload (execute returned 0): the action's own refusal, or its kit's check of the payload before the handler ran: not strict JSON, nesting past 128 levels, or a lone surrogate escape such as \\ud800.");
});

test('an undeclared secret is absent, and a permission edit does not widen the approved version', async () => {
  const narrow = await upload('narrow-scorer', scorer, '');
  const id = narrow.body.custom_action.id;
  await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${id}/secrets`, { token: key, json: { key: 'RISK_THRESHOLD', value: '5' } });
  await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${id}/review`, { token: key, json: { status: 'approved', version: 1 } });
  const widened = await call(rt.url, 'PATCH', `/organizations/${ORG}/custom-actions/${id}`, { token: key, json: { permissions: ['read_secret:RISK_THRESHOLD'] } });
  assert.equal(widened.status, 200, widened.text);
  await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'narrow', trigger_event: 'orders.narrow', steps: [{ id: 'score', type: 'custom_action', action_id: id }] } });
  await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'orders.narrow', payload: { order_id: 'n1', amount_cents: 100 }, id: 'narrow-1' } });
  const reactions = await eventually('narrow run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/narrow-1`, { token: key })).body.reactions, (r) => r.length === 1 && r[0].state === 'completed');
  const run = await runOf(reactions[0].run_id);
  assert.equal(run.steps[0].result.projection.data.threshold_source, 'default', 'the secret was not injected: the approved version declared no permission');
  assert.equal(run.steps[0].result.projection.data.threshold, 70);
});
