// POST /events with an Idempotency-Key header: the key names the event when the body has no "id",
// so a client retrying with the key makes one event (the retry is 409 duplicate_event, as a
// repeated id is); a key that cannot be an event id, or that disagrees with the body's, is a 400
// that stores nothing.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';

const ORG = 'acct-event-keys';
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

const send = (json: Record<string, unknown>, idempotencyKey: string) =>
  call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.paid', payload: { n: 1 }, ...json }, headers: { 'idempotency-key': idempotencyKey } });
const storedIds = async (): Promise<string[]> => ((await call(rt.url, 'GET', `/organizations/${ORG}/events?limit=50`, { token: key })).body.events as Array<{ id: string }>).map((e) => e.id).sort();

test('the key names the event; a retry with it is 409 duplicate_event, not a second event', async () => {
  const first = await send({}, 'order-7f3a:paid');
  assert.equal(first.status, 202, first.text);
  assert.equal(first.body.event.id, 'order-7f3a:paid');
  const retry = await send({}, 'order-7f3a:paid');
  assert.equal(retry.status, 409);
  assert.equal(retry.body.error.code, 'duplicate_event');
  const both = await send({ id: 'same-in-both' }, 'same-in-both');
  assert.equal(both.status, 202, 'the same id in the body and the header');
  assert.deepEqual(await storedIds(), ['order-7f3a:paid', 'same-in-both']);
});

test('a key that cannot be an event id, is reserved, or disagrees with the body\'s id is a 400 naming the header, and stores nothing', async () => {
  const before = await storedIds();
  for (const [json, header, code] of [
    [{}, 'has space', 'invalid_idempotency_key'],
    [{}, `k${'x'.repeat(128)}`, 'invalid_idempotency_key'],
    [{}, 'evt_sch_forged', 'reserved_event_id'],
    [{ id: 'body-id' }, 'header-id', 'idempotency_key_mismatch'],
  ] as const) {
    const answer = await send(json, header);
    assert.equal(answer.status, 400, header);
    assert.equal(answer.body.error.code, code, header);
    assert.equal(answer.body.error.field, 'Idempotency-Key', header);
  }
  assert.deepEqual(await storedIds(), before);
});
