// Source changes that land while a delivery or a write waits off the event loop (its payload's
// schema check, its schemas' compile): the delivery or write is judged by the source as it is
// when it finishes, so nothing is stored for a deleted source or with a removed secret.
//
// The runtime here gives a payload check 60 s instead of 1 s: these checks take most of a second
// on purpose (the change must land while they run), and on a loaded machine a 1 s deadline
// refused them as too slow instead.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard, type CallResult } from '../helpers/http.ts';

const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
const base = '/organizations/acct-race/sources';
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime({ schemaDeadlines: { checkMs: 60_000, compileMs: 60_000 } });
  key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-race');
});
after(async () => rt.close());

/** A schema whose check costs items x branches: 2,500 items against 300 values take about half a second, its compile more. */
const slowSchema = { type: 'object', properties: { a: { type: 'array', items: { anyOf: Array.from({ length: 300 }, (_, i) => ({ const: `v${i}` })) } } } };
const waitForTheCheckToStart = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 100));

/** Makes source `name` with the slow schema for `type` and sends it a delivery; resolves once the delivery waits for its check. */
async function deliverSlowly(name: string, type: string): Promise<{ answered: Promise<CallResult> }> {
  const created = await call(rt.url, 'POST', base, { token: key, json: { name, secrets: [SECRET], event_types: { [type]: slowSchema } } });
  assert.equal(created.status, 201, created.text);
  const body = JSON.stringify({ type, a: Array.from({ length: 2500 }, () => 'v299') });
  const delivery = call(rt.url, 'POST', `/hooks/acct-race/${name}`, { body, headers: signStandard(SECRET, `${name}-1`, Math.floor(Date.now() / 1000), body) });
  await waitForTheCheckToStart();
  return { answered: delivery };
}

async function storedOfType(type: string): Promise<unknown[]> {
  return (await call(rt.url, 'GET', `/organizations/acct-race/events?type=${type}`, { token: key })).body.events;
}

test('a source deleted while its delivery waited for the schema check is 404: nothing is stored for it', async () => {
  const delivery = await deliverSlowly('going', 'g.x');
  assert.equal((await call(rt.url, 'DELETE', `${base}/going`, { token: key })).status, 204);
  const answered = await delivery.answered;
  assert.equal(answered.status, 404, answered.text);
  assert.deepEqual(await storedOfType('g.x'), [], 'nothing stored for the deleted source');
});

test('a delivery whose source lost its secret while the delivery waited for its schema check is verified again: 401, nothing stored', async () => {
  const delivery = await deliverSlowly('rotating', 'rot.x');
  const newer = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
  assert.equal((await call(rt.url, 'PATCH', `${base}/rotating`, { token: key, json: { secrets: [newer] } })).status, 200);
  const answered = await delivery.answered;
  assert.equal(answered.status, 401, answered.text);
  assert.equal(answered.body.error.code, 'invalid_signature');
  assert.deepEqual(await storedOfType('rot.x'), [], 'nothing stored with the removed secret');
});

test('a PATCH whose source was deleted and made again while its schemas compiled is 404: the new source keeps its own scheme, secrets and schemas', async () => {
  assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name: 'remade', scheme: 'stripe', secrets: ['stripe secret'], environment: 'sandbox' } })).status, 201);
  const eventTypes = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`t.${i}`, { type: 'object', properties: Object.fromEntries(Array.from({ length: 120 }, (_, j) => [`p${j}`, { type: 'string', minLength: 1, maxLength: 64 }])) }]));
  // Compiling these takes about a second or more: the delete and the new source land meanwhile.
  const patching = call(rt.url, 'PATCH', `${base}/remade?environment=sandbox`, { token: key, json: { secrets: ['stripe secret 2'], event_types: eventTypes } });
  await waitForTheCheckToStart();
  assert.equal((await call(rt.url, 'DELETE', `${base}/remade?environment=sandbox`, { token: key })).status, 204);
  assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name: 'remade', secrets: [SECRET] } })).status, 201);
  const patched = await patching;
  assert.equal(patched.status, 404, patched.text);
  const remade = await call(rt.url, 'GET', `${base}/remade`, { token: key });
  assert.deepEqual([remade.body.source.scheme, remade.body.source.environment, remade.body.source.event_types], ['standard-webhooks', 'production', {}]);
  const body = JSON.stringify({ type: 'r.x' });
  const signed = await call(rt.url, 'POST', '/hooks/acct-race/remade', { body, headers: signStandard(SECRET, 'remade-1', Math.floor(Date.now() / 1000), body) });
  assert.equal(signed.status, 204, 'the new source verifies with its own secret');
});
