// POST /events with an Idempotency-Key header: the key names the event when the body has no "id",
// so a client retrying with the key makes one event (the retry is 409 duplicate_event, as a
// repeated id is); a key that is no event id (the replay API's rule allows more), or one in Sluice's
// own id namespaces, names it by its hash; the body's id wins over the header, which is then not
// read; a key the replay API refuses is refused here too.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { generateEventId } from '../../runtime/events/event-record.ts';

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
  // Not an event id (base64, past 128 characters), or one of Sluice's own (another Sluice's event
  // id forwarded as the key): named by its hash, retried the same way.
  for (const key of ['q8+/Zm9vYmFy==', `k${'x'.repeat(200)}`, 'evt_sch_forwarded', generateEventId(Date.now())]) {
    const hashed = await send({}, key);
    assert.equal(hashed.status, 202, hashed.text);
    assert.match(hashed.body.event.id, /^key_[0-9a-f]{40}$/);
    assert.equal((await send({}, key)).status, 409, key);
  }
  // The body's id wins: retry middleware that adds a fresh key to every request changes nothing.
  const both = await send({ id: 'body-id-wins' }, 'fresh-uuid-1');
  assert.equal(both.status, 202, both.text);
  assert.equal(both.body.event.id, 'body-id-wins');
  assert.equal((await send({ id: 'body-id-wins' }, 'fresh-uuid-2')).status, 409);
  // With an id in the body the header is not read at all, even one the key rule would refuse.
  for (const [id, header] of [['body-id-space-key', 'order 42 retry'], ['body-id-long-key', `k${'x'.repeat(255)}`]] as const) {
    const sent = await send({ id }, header);
    assert.equal(sent.status, 202, sent.text);
    assert.equal(sent.body.event.id, id);
  }
  assert.equal((await storedIds()).length, 8);
});

test('a key the replay API refuses (a space, past 255 characters, the header sent twice) is a 400 naming the header, and stores nothing', async () => {
  const before = await storedIds();
  for (const [header, code] of [
    ['has space', 'invalid_idempotency_key'],
    [`k${'x'.repeat(255)}`, 'invalid_idempotency_key'],
  ] as const) {
    const answer = await send({}, header);
    assert.equal(answer.status, 400, header);
    assert.equal(answer.body.error.code, code, header);
    assert.equal(answer.body.error.field, 'Idempotency-Key', header);
  }
  // Two header lines reach the API joined; the answer says what happened, not "without spaces".
  const twice = await send({}, 'k1, k1');
  assert.deepEqual([twice.status, twice.body.error.code], [400, 'invalid_idempotency_key']);
  assert.match(twice.body.error.message, /was sent more than once/);
  assert.deepEqual(await storedIds(), before);
});
