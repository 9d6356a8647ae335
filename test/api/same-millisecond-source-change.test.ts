// A source changed in the same millisecond as its previous write (the clock here never moves) is
// still a changed source to a delivery that waited for its schema check: every write moves the
// source's updated_at on (update-stamp.ts), which is how the delivery tells the change apart; and
// one deleted and made again in that millisecond is another source (its id).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { gateNextCall } from '../helpers/method-gate.ts';

const ORG = 'acct-same-ms';
const OLD = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
const NEW = `whsec_${Buffer.alloc(32, 4).toString('base64')}`;
const base = `/organizations/${ORG}/sources`;
const clock = new ManualClock(Date.now());
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime({ clock });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => rt.close());

test('a secret removed in the same millisecond while a delivery waited for its schema check: verified again, 401, nothing stored', async () => {
  const made = await call(rt.url, 'POST', base, { token: key, json: { name: 'pay', secrets: [OLD], event_types: { 'order.paid': { type: 'object' } } } });
  assert.equal(made.status, 201, made.text);
  const held = gateNextCall(rt.runtime.context.schemas.payloads, 'check');
  const body = JSON.stringify({ type: 'order.paid', id: 'evt-1' });
  const delivery = call(rt.url, 'POST', `/hooks/${ORG}/pay`, { body, headers: signStandard(OLD, 'msg-1', Math.floor(clock.now() / 1000), body) });
  try {
    await held.reachedBefore(delivery, 'the delivery');
    const rotated = await call(rt.url, 'PATCH', `${base}/pay`, { token: key, json: { secrets: [NEW] } });
    assert.equal(rotated.status, 200, rotated.text);
    assert.notEqual(rotated.body.source.updated_at, made.body.source.updated_at, 'the write moved the stamp on though the clock did not move');
  } finally {
    held.done();
  }
  const answered = await delivery;
  assert.deepEqual([answered.status, answered.body?.error?.code], [401, 'invalid_signature'], `answered ${answered.status} ${answered.text}`);
  const stored = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=order.paid`, { token: key });
  assert.deepEqual(stored.body.events, [], 'nothing stored with the removed secret');
});

test('a source deleted and made again in the same millisecond while a delivery waited for its schema check is another source: 404, nothing stored', async () => {
  const schema = { 'order.paid': { type: 'object' } };
  assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name: 'remade', secrets: [OLD], event_types: schema } })).status, 201);
  const held = gateNextCall(rt.runtime.context.schemas.payloads, 'check');
  const body = JSON.stringify({ type: 'order.paid', id: 'evt-2' });
  const delivery = call(rt.url, 'POST', `/hooks/${ORG}/remade`, { body, headers: signStandard(OLD, 'msg-2', Math.floor(clock.now() / 1000), body) });
  try {
    await held.reachedBefore(delivery, 'the delivery');
    assert.equal((await call(rt.url, 'DELETE', `${base}/remade`, { token: key })).status, 204);
    assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name: 'remade', secrets: [NEW], event_types: schema } })).status, 201);
  } finally {
    held.done();
  }
  const answered = await delivery;
  assert.equal(answered.status, 404, `answered ${answered.status} ${answered.text}`);
  const stored = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=order.paid&source=remade`, { token: key });
  assert.deepEqual(stored.body.events, [], 'nothing stored for the source made again');
});
