// Source changes that land while a delivery or a write waits off the event loop (its payload's
// schema check, its schemas' compile): the delivery or write is judged by the source as it is
// when it finishes, so nothing is stored for a deleted source or with a removed secret.
//
// The check or compile is held (gateNextCall) until the change has landed, so the change lands
// during the wait every time, however fast or loaded the machine.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard, type CallResult } from '../helpers/http.ts';
import { gateNextCall } from '../helpers/method-gate.ts';

const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
const base = '/organizations/acct-race/sources';
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-race');
});
after(async () => rt.close());

/** A schema the deliveries here pass: the delivery is judged on its source, not its payload. */
const passedSchema = { type: 'object', properties: { a: { type: 'array', items: { const: 'v1' } } } };

/**
 * Makes source `name` with a schema for `type` and sends it a delivery; resolves once the delivery
 * waits for its check, which is held until `release`.
 */
async function deliverHeld(name: string, type: string): Promise<{ answered: Promise<CallResult>; release: () => void }> {
  const created = await call(rt.url, 'POST', base, { token: key, json: { name, secrets: [SECRET], event_types: { [type]: passedSchema } } });
  assert.equal(created.status, 201, created.text);
  const held = gateNextCall(rt.runtime.context.schemas.payloads, 'check');
  const body = JSON.stringify({ type, a: ['v1', 'v1'] });
  const delivery = call(rt.url, 'POST', `/hooks/acct-race/${name}`, { body, headers: signStandard(SECRET, `${name}-1`, Math.floor(Date.now() / 1000), body) });
  try {
    await held.reachedBefore(delivery, 'the delivery');
  } catch (error) {
    held.done();
    throw error;
  }
  return { answered: delivery, release: held.done };
}

/** Runs `body` with the delivery held, letting it go however `body` ends (a failed assertion must not leave a request open). */
async function whileHeld(delivery: { release: () => void }, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } finally {
    delivery.release();
  }
}

async function storedOfType(type: string): Promise<unknown[]> {
  return (await call(rt.url, 'GET', `/organizations/acct-race/events?type=${type}`, { token: key })).body.events;
}

test('a source deleted while its delivery waited for the schema check is 404: nothing is stored for it', async () => {
  const delivery = await deliverHeld('going', 'g.x');
  await whileHeld(delivery, async () => assert.equal((await call(rt.url, 'DELETE', `${base}/going`, { token: key })).status, 204));
  const answered = await delivery.answered;
  assert.equal(answered.status, 404, answered.text);
  assert.deepEqual(await storedOfType('g.x'), [], 'nothing stored for the deleted source');
});

test('a delivery whose source lost its secret while the delivery waited for its schema check is verified again: 401, nothing stored', async () => {
  const delivery = await deliverHeld('rotating', 'rot.x');
  const newer = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
  await whileHeld(delivery, async () => assert.equal((await call(rt.url, 'PATCH', `${base}/rotating`, { token: key, json: { secrets: [newer] } })).status, 200));
  const answered = await delivery.answered;
  assert.equal(answered.status, 401, answered.text);
  assert.equal(answered.body.error.code, 'invalid_signature');
  assert.deepEqual(await storedOfType('rot.x'), [], 'nothing stored with the removed secret');
});

test('a PATCH whose source was deleted and made again while its schemas compiled is 404: the new source keeps its own scheme, secrets and schemas', async () => {
  assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name: 'remade', scheme: 'stripe', secrets: ['stripe secret'], environment: 'sandbox' } })).status, 201);
  const eventTypes = { 't.1': { type: 'object', properties: { p: { type: 'string', minLength: 1, maxLength: 64 } } } };
  // The compile is held until the delete and the new source have landed.
  const held = gateNextCall(rt.runtime.context.schemas.writes, 'compile');
  const patching = call(rt.url, 'PATCH', `${base}/remade?environment=sandbox`, { token: key, json: { secrets: ['stripe secret 2'], event_types: eventTypes } });
  try {
    await held.reachedBefore(patching, 'the PATCH');
    assert.equal((await call(rt.url, 'DELETE', `${base}/remade?environment=sandbox`, { token: key })).status, 204);
    assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name: 'remade', secrets: [SECRET] } })).status, 201);
  } finally {
    held.done();
  }
  const patched = await patching;
  assert.equal(patched.status, 404, patched.text);
  const remade = await call(rt.url, 'GET', `${base}/remade`, { token: key });
  assert.deepEqual([remade.body.source.scheme, remade.body.source.environment, remade.body.source.event_types], ['standard-webhooks', 'production', {}]);
  const body = JSON.stringify({ type: 'r.x' });
  const signed = await call(rt.url, 'POST', '/hooks/acct-race/remade', { body, headers: signStandard(SECRET, 'remade-1', Math.floor(Date.now() / 1000), body) });
  assert.equal(signed.status, 204, 'the new source verifies with its own secret');
});
