// The events API: custom events, repeated ids, paging by time, type filters and the
// production/sandbox partition.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { generateEventId, RESERVED_EVENT_ID_PREFIXES } from '../../runtime/events/event-record.ts';
import { derivedEventId } from '../../runtime/runs/step-effects.ts';
import { connectedEventId, type DeviceConnection, type DeviceRecord } from '../../runtime/triggers/device-record.ts';
import { tickEventId, type ScheduleRecord } from '../../runtime/triggers/schedule-record.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';

const clock = new ManualClock(Date.UTC(2026, 10, 30));
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime({ clock });
  key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-events');
});
after(async () => rt.close());

const send = (json: unknown) => call(rt.url, 'POST', '/organizations/acct-events/events', { token: key, json });

test('a custom event is stored (202) and readable; a repeated id is 409', async () => {
  const sent = await send({ type: 'order.placed', payload: { order: 1 }, id: 'order-1' });
  assert.equal(sent.status, 202);
  assert.equal(sent.body.event.id, 'order-1');
  assert.equal(sent.body.event.source, '@api');
  assert.equal(sent.body.event.depth, 0);
  assert.equal(sent.body.event.correlation_id, 'order-1');
  const repeat = await send({ type: 'order.placed', payload: { order: 2 }, id: 'order-1' });
  assert.equal(repeat.status, 409);
  assert.equal(repeat.body.error.original_event_id, 'order-1');
  const fetched = await call(rt.url, 'GET', '/organizations/acct-events/events/order-1', { token: key });
  assert.equal(fetched.status, 200);
  assert.deepEqual(fetched.body.event.payload, { order: 1 });
  assert.equal(fetched.body.recording, null);
  assert.deepEqual(fetched.body.reactions, []);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-events/events/nope', { token: key })).status, 404);
});

test('invalid event bodies name the field', async () => {
  const noType = await send({ payload: {} });
  assert.equal(noType.status, 400);
  assert.equal(noType.body.error.field, 'type');
  const badType = await send({ type: 'has space', payload: {} });
  assert.equal(badType.body.error.field, 'type');
  const badEnv = await send({ type: 'a.b', payload: {}, environment: 'staging' });
  assert.equal(badEnv.body.error.field, 'environment');
  const badId = await send({ type: 'a.b', payload: {}, id: 'ünï' });
  assert.equal(badId.body.error.field, 'id');
  for (const type of ['device.connected', 'device.disconnected']) {
    const reserved = await send({ type, payload: { device: 'kiosk-1' } });
    assert.deepEqual([reserved.status, reserved.body.error.code, reserved.body.error.field], [400, 'reserved_event_type', 'type'], 'only Sluice writes device connection events');
  }
  const notJson = await call(rt.url, 'POST', '/organizations/acct-events/events', { token: key, body: 'x', headers: { 'content-type': 'text/plain' } });
  assert.equal(notJson.status, 415);
});

test('an id in one of Sluice\'s own namespaces (derived, device, schedule events) is a 400; a Stripe-style evt_ id is the caller\'s', async () => {
  const own = [derivedEventId('run_1', 'step'), tickEventId({ id: 'sch_1' } as ScheduleRecord, 0), connectedEventId({ id: 'dev_1' } as DeviceRecord, { id: 'c_1' } as DeviceConnection)];
  for (const id of own) {
    assert.ok(RESERVED_EVENT_ID_PREFIXES.some((prefix) => id.startsWith(prefix)), `${id} is in a reserved namespace`);
    const refused = await send({ type: 'order.placed', payload: {}, id });
    assert.deepEqual([refused.status, refused.body.error.code, refused.body.error.field], [400, 'reserved_event_id', 'id'], id);
  }
  const stripeStyle = await send({ type: 'order.placed', payload: {}, id: 'evt_1NG8Du2eZvKYlo2CUI79vXWy' });
  assert.equal(stripeStyle.status, 202, stripeStyle.text);
});

test('an id of the shape Sluice generates is a 400: once its event is pruned, taking it would give new runs the old runs\' ids and effect keys', async () => {
  const generated = await send({ type: 'order.placed', payload: {} });
  assert.equal(generated.status, 202, generated.text);
  for (const id of [generated.body.event.id as string, generateEventId(clock.now() + 60_000)]) {
    const refused = await send({ type: 'order.placed', payload: {}, id });
    assert.deepEqual([refused.status, refused.body.error.code, refused.body.error.field], [400, 'reserved_event_id', 'id'], id);
  }
  // Close to it but not it (upper case, one character short): the caller's.
  for (const id of [generateEventId(clock.now()).toUpperCase().replace('EVT_', 'evt_'), generateEventId(clock.now()).slice(0, -1)]) {
    const taken = await send({ type: 'order.placed', payload: {}, id });
    assert.equal(taken.status, 202, `${id}: ${taken.text}`);
  }
});

test('listing pages newest first, filters by type, and never mixes environments', async () => {
  for (let i = 0; i < 7; i++) {
    clock.advance(1000);
    assert.equal((await send({ type: i % 2 === 0 ? 'page.even' : 'page.odd', payload: { i }, id: `page-${i}` })).status, 202);
  }
  clock.advance(1000);
  assert.equal((await send({ type: 'page.even', payload: { sandbox: true }, id: 'sandbox-1', environment: 'sandbox' })).status, 202);

  const seen: number[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `?type=page.even&limit=2${cursor === null ? '' : `&cursor=${cursor}`}`;
    const page = await call(rt.url, 'GET', `/organizations/acct-events/events${query}`, { token: key });
    assert.equal(page.status, 200);
    assert.ok(page.body.events.length <= 2);
    seen.push(...page.body.events.map((e: { payload: { i: number } }) => e.payload.i));
    cursor = page.body.next_cursor;
  } while (cursor !== null);
  assert.deepEqual(seen, [6, 4, 2, 0]);
  const all = (await call(rt.url, 'GET', '/organizations/acct-events/events?limit=500', { token: key })).body.events.length;
  const exact = await call(rt.url, 'GET', `/organizations/acct-events/events?limit=${all}`, { token: key });
  assert.deepEqual([exact.body.events.length, exact.body.next_cursor], [all, null], 'a page that holds exactly the rest says there is no more');
  const short = await call(rt.url, 'GET', `/organizations/acct-events/events?limit=${all - 1}`, { token: key });
  assert.ok(short.body.next_cursor !== null, 'one left beyond a full page: a cursor');

  const sandbox = await call(rt.url, 'GET', '/organizations/acct-events/events?environment=sandbox', { token: key });
  assert.deepEqual(sandbox.body.events.map((e: { id: string }) => e.id), ['sandbox-1']);
  const production = await call(rt.url, 'GET', '/organizations/acct-events/events?limit=500', { token: key });
  assert.ok(!production.body.events.some((e: { id: string }) => e.id === 'sandbox-1'));
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-events/events/sandbox-1', { token: key })).status, 404);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-events/events/sandbox-1?environment=sandbox', { token: key })).status, 200);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-events/events?cursor=garbage', { token: key })).status, 400);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-events/events?limit=0', { token: key })).status, 400);
});
