// The per-tenant ingest quota: starter orgs default to 100 events/s, paid plans are unlimited until
// set; over the quota webhooks and API events get 429 with Retry-After and nothing is stored; only stored events count.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { holdReset } from '../helpers/hold-reset.ts';
import { IngestQuota, QuotaExceededError } from '../../runtime/ingest/ingest-quota.ts';
import type { Organization } from '../../runtime/tenancy/organizations.ts';
import type { EventStore, NewEvent } from '../../runtime/events/event-store.ts';
import type { StoredEvent } from '../../runtime/events/event-record.ts';

const clock = new ManualClock(Date.UTC(2026, 10, 30, 10, 0, 0));
const SECRET = `whsec_${Buffer.alloc(32, 13).toString('base64')}`;
let rt: TestRuntime;
before(async () => {
  rt = await startRuntime({ clock });
});
after(async () => rt.close());

test("forgetOrg lets go of a removed org's buckets: what the org had spent is not remembered", () => {
  const org = { id: 'acct-q-gone', ingest_rate_per_second: 1 } as Organization;
  const quota = new IngestQuota(clock, () => org);
  quota.charge(org);
  quota.charge(org);
  assert.throws(() => quota.charge(org), QuotaExceededError, 'one a second, and one on credit');
  quota.forgetOrg(org.id);
  assert.doesNotThrow(() => quota.charge(org), 'a new bucket, full');
});

test('a charge not on credit takes its events only once the bucket holds them, or is full when it holds fewer', () => {
  const org = { id: 'acct-q-no-credit', ingest_rate_per_second: 4 } as Organization;
  const quota = new IngestQuota(clock, () => org);
  quota.charge(org, 3, false);
  assert.throws(() => quota.charge(org, 2, false), (error: unknown) => error instanceof QuotaExceededError && error.retryAfterMs === 250, 'one of two there: a quarter second for the other');
  assert.doesNotThrow(() => quota.charge(org, 2), 'on credit, taken while the bucket is not in debt');
  clock.advance(250);
  assert.throws(() => quota.charge(org, 2, false), (error: unknown) => error instanceof QuotaExceededError && error.retryAfterMs === 500, 'the debt paid off, none there yet');
  clock.advance(500);
  assert.doesNotThrow(() => quota.charge(org, 2, false));
  // A bucket smaller than the charge (one event a second): full is enough.
  const slow = { id: 'acct-q-no-credit-slow', ingest_rate_per_second: 1 } as Organization;
  const slowQuota = new IngestQuota(clock, () => slow);
  slowQuota.charge(slow, 2, false);
  assert.throws(() => slowQuota.charge(slow, 2, false), QuotaExceededError);
  clock.advance(2000);
  assert.doesNotThrow(() => slowQuota.charge(slow, 2, false), 'full again after its debt of one and a second');
});

test('a sender held to a moment (heldMs) is refused for it whatever the bucket holds, taking nothing; an org without a rate holds no one', async () => {
  const stored: string[] = [];
  const events = { store: async ({ event }: NewEvent) => (stored.push(event.id), event), refuseDuplicate: async () => undefined } as unknown as EventStore;
  const newEvent = (id: string): NewEvent => ({ event: { id, payload: { n: 1 } } as unknown as StoredEvent, recording: null, claim: null });
  const limited = { id: 'acct-q-held', ingest_rate_per_second: 2 } as Organization;
  const quota = new IngestQuota(clock, (id) => (id === limited.id ? limited : undefined));
  await assert.rejects(quota.storeEvent(limited, events, newEvent('held'), 120), (error: unknown) => error instanceof QuotaExceededError && error.retryAfterMs === 120 && error.limit === '2 events' && error.slotMs === 500);
  await quota.storeEvent(limited, events, newEvent('a'));
  await quota.storeEvent(limited, events, newEvent('b'));
  await assert.rejects(quota.storeEvent(limited, events, newEvent('c')), QuotaExceededError, 'the hold took none of the two');
  const bytesOnly = { id: 'acct-q-held-bytes', ingest_rate_per_second: null, ingest_bytes_per_second: 1_048_576 } as unknown as Organization;
  await assert.rejects(quota.storeEvent(bytesOnly, events, newEvent('held-bytes'), 40), (error: unknown) => error instanceof QuotaExceededError && error.limit === '1048576 payload bytes' && error.retryAfterMs === 40 && error.slotMs === (7 * 1000) / 1_048_576, 'told the byte rate, the slot of its 7 bytes ({"n":1})');
  const unlimited = { id: 'acct-q-held-none', ingest_rate_per_second: null } as unknown as Organization;
  await quota.storeEvent(unlimited, events, newEvent('free'), 40);
  assert.deepEqual(stored, ['a', 'b', 'free']);
});

test('plans set the default quota; the platform admin can change it', async () => {
  await createOrg(rt.url, ADMIN_TOKEN, 'acct-q-starter', 'starter');
  await createOrg(rt.url, ADMIN_TOKEN, 'acct-q-pro', 'pro');
  const starter = await call(rt.url, 'GET', '/organizations/acct-q-starter', { token: ADMIN_TOKEN });
  assert.equal(starter.body.organization.ingest_rate_per_second, 100);
  const pro = await call(rt.url, 'GET', '/organizations/acct-q-pro', { token: ADMIN_TOKEN });
  assert.equal(pro.body.organization.ingest_rate_per_second, null);
  const bad = await call(rt.url, 'PATCH', '/organizations/acct-q-pro', { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 0 } });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.field, 'ingest_rate_per_second');
});

test('over the quota: 429 with Retry-After for webhooks and API events, nothing stored, refilled by the clock', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-q');
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q', { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 3 } })).status, 200);
  await call(rt.url, 'POST', '/organizations/acct-q/sources', { token: key, json: { name: 'in', secrets: [SECRET] } });
  const hook = (id: string) => {
    const body = JSON.stringify({ type: 'q.x' });
    return call(rt.url, 'POST', '/hooks/acct-q/in', { body, headers: signStandard(SECRET, id, Math.floor(clock.now() / 1000), body) });
  };
  assert.deepEqual([(await hook('m1')).status, (await hook('m2')).status], [204, 204]);
  assert.equal((await call(rt.url, 'POST', '/organizations/acct-q/events', { token: key, json: { type: 'q.api', payload: {}, id: 'api-1' } })).status, 202);
  const over = await hook('m3');
  assert.equal(over.status, 429);
  assert.equal(over.body.error.code, 'ingest_quota_exceeded');
  assert.equal(over.headers.get('retry-after'), '1');
  const overApi = await call(rt.url, 'POST', '/organizations/acct-q/events', { token: key, json: { type: 'q.api', payload: {}, id: 'api-2' } });
  assert.equal(overApi.status, 429);
  // Requests are told the plain wait (Retry-After counts whole seconds); only device sockets are told moments apart (retry-stagger.ts).
  assert.match(over.body.error.message, /retry after 334 ms\.$/);
  assert.match(overApi.body.error.message, /retry after 334 ms\.$/);
  assert.match(over.body.error.message, /^This organization may send 3 events per second;/);
  const listed = await call(rt.url, 'GET', '/organizations/acct-q/events', { token: key });
  assert.equal(listed.body.events.length, 3, 'refused events were not stored');
  const oneKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-q-one');
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-one', { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 1 } })).status, 200);
  const oneEvent = () => call(rt.url, 'POST', '/organizations/acct-q-one/events', { token: oneKey, json: { type: 'q.api', payload: {} } });
  assert.equal((await oneEvent()).status, 202);
  const overOne = await oneEvent();
  assert.equal(overOne.status, 429);
  assert.match(overOne.body.error.message, /^This organization may send 1 event per second;/, 'one event, not "1 events"');
  clock.advance(1000);
  assert.equal((await hook('m3')).status, 204, 'the provider retry after Retry-After is accepted');
});

test('a wall clock set back refills nothing and locks no one out for the time it went back', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-q-back');
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-back', { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 2 } })).status, 200);
  const send = (id: string) => call(rt.url, 'POST', '/organizations/acct-q-back/events', { token: key, json: { type: 'q.api', payload: {}, id } });
  assert.equal((await send('b1')).status, 202);
  const before = clock.now();
  try {
    clock.set(before - 3_600_000);
    assert.equal((await send('b2')).status, 202, 'the token left before the clock went back is still there');
    const over = await send('b3');
    assert.equal(over.status, 429, 'going back gave no tokens');
    assert.equal(over.headers.get('retry-after'), '1', 'the wait is the refill time, not the hour the clock went back');
    clock.advance(1000);
    assert.equal((await send('b3')).status, 202);
  } finally {
    clock.set(before + 1000);
  }
});

test('requests that fail the signature check do not use up the quota', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-q-forged');
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-forged', { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 2 } })).status, 200);
  await call(rt.url, 'POST', '/organizations/acct-q-forged/sources', { token: key, json: { name: 'in', secrets: [SECRET] } });
  const body = JSON.stringify({ type: 'q.x' });
  const forgedSecret = `whsec_${Buffer.alloc(32, 99).toString('base64')}`;
  for (let i = 0; i < 5; i++) {
    const forged = await call(rt.url, 'POST', '/hooks/acct-q-forged/in', { body, headers: signStandard(forgedSecret, `f${i}`, Math.floor(clock.now() / 1000), body) });
    assert.equal(forged.status, 401);
    const unsigned = await call(rt.url, 'POST', '/hooks/acct-q-forged/in', { body, headers: { 'content-type': 'text/plain' } });
    assert.equal(unsigned.status, 415);
  }
  const real = await call(rt.url, 'POST', '/hooks/acct-q-forged/in', { body, headers: signStandard(SECRET, 'real-1', Math.floor(clock.now() / 1000), body) });
  assert.equal(real.status, 204, 'the real provider is not locked out by forged requests');
});

test('copies of a stored delivery, and API events sent again with their id, are 409 and do not use up the quota', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-q-dup');
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-dup', { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 3 } })).status, 200);
  await call(rt.url, 'POST', '/organizations/acct-q-dup/sources', { token: key, json: { name: 'in', secrets: [SECRET] } });
  const body = JSON.stringify({ type: 'q.x' });
  const hook = (id: string) => call(rt.url, 'POST', '/hooks/acct-q-dup/in', { body, headers: signStandard(SECRET, id, Math.floor(clock.now() / 1000), body) });
  assert.equal((await hook('captured')).status, 204);
  assert.equal((await call(rt.url, 'POST', '/organizations/acct-q-dup/events', { token: key, json: { type: 'q.api', payload: {}, id: 'api-once' } })).status, 202);
  for (let i = 0; i < 5; i++) {
    assert.equal((await hook('captured')).status, 409, 'a replayed copy is a duplicate, not a 429');
    assert.equal((await call(rt.url, 'POST', '/organizations/acct-q-dup/events', { token: key, json: { type: 'q.api', payload: {}, id: 'api-once' } })).status, 409);
  }
  assert.equal((await hook('new-one')).status, 204, 'the provider\'s next new event still fits in the quota');
});

test('with the quota used up, a copy of a stored delivery or API event is still 409 (the sender stops), a new one 429', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-q-full');
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-full', { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 2 } })).status, 200);
  await call(rt.url, 'POST', '/organizations/acct-q-full/sources', { token: key, json: { name: 'in', secrets: [SECRET] } });
  const body = JSON.stringify({ type: 'q.x' });
  const hook = (id: string) => call(rt.url, 'POST', '/hooks/acct-q-full/in', { body, headers: signStandard(SECRET, id, Math.floor(clock.now() / 1000), body) });
  const api = (id: string) => call(rt.url, 'POST', '/organizations/acct-q-full/events', { token: key, json: { type: 'q.api', payload: {}, id } });
  const stored = await hook('first');
  assert.equal(stored.status, 204);
  assert.equal((await api('api-first')).status, 202);
  const copy = await hook('first');
  assert.equal(copy.status, 409, copy.text);
  assert.equal(copy.body.error.original_event_id, stored.headers.get('sluice-event-id'));
  assert.equal((await api('api-first')).status, 409);
  const fresh = await hook('second');
  assert.equal(fresh.status, 429, 'a new delivery waits for the quota');
  assert.equal((await api('api-second')).status, 429);
});

test('with the quota used up, a retried keyed replay answers its replay (202) and a device sending a stored message again gets its duplicate ack', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-q-full-2');
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-full-2', { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 5 } })).status, 200);
  const created = await call(rt.url, 'POST', '/organizations/acct-q-full-2/devices', { token: key, json: { name: 'till' } });
  assert.equal(created.status, 201, created.text);
  const device = await connectDevice(rt.url, 'acct-q-full-2', 'till', created.body.token);
  device.send({ id: 'sale-1', type: 'sale.made', payload: {} });
  const first = await device.answerTo('sale-1');
  assert.deepEqual([first.type, first.duplicate], ['ack', false]);
  const original = await call(rt.url, 'POST', '/organizations/acct-q-full-2/events', { token: key, json: { type: 'q.api', payload: {} } });
  assert.equal(original.status, 202);
  const replay = () => call(rt.url, 'POST', `/organizations/acct-q-full-2/events/${original.body.event.id}/replay`, { token: key, json: { side_effects: 'skip' }, headers: { 'idempotency-key': 'support-ticket-9' } });
  const made = await replay();
  assert.equal(made.status, 202, made.text);
  // Five taken (the device's connection, two: its connected and disconnected events; the message, the event, the replay): the quota is used up.
  assert.equal((await call(rt.url, 'POST', '/organizations/acct-q-full-2/events', { token: key, json: { type: 'q.api', payload: {} } })).status, 429);
  const retried = await replay();
  assert.equal(retried.status, 202, retried.text);
  assert.equal(retried.headers.get('idempotent-replayed'), 'true');
  assert.equal(retried.body.event.id, made.body.event.id);
  device.send({ id: 'sale-1', type: 'sale.made', payload: {} });
  await device.waitFor(() => device.frames.filter((f) => f.id === 'sale-1').length === 2, 'the second answer');
  const again = device.frames.filter((f) => f.id === 'sale-1')[1]!;
  assert.deepEqual([again.type, again.duplicate, again.event_id], ['ack', true, first.event_id]);
  device.send({ id: 'sale-2', type: 'sale.made', payload: {} });
  const fresh = await device.answerTo('sale-2');
  assert.deepEqual([fresh.type, fresh.error?.code, fresh.retryable], ['nack', 'ingest_quota_exceeded', true]);
  device.close(1000);
  await device.closed;
});

test('a byte quota: payload bytes per second, one second of burst; a payload over a second\'s bytes waits for a full bucket and leaves it in debt', async () => {
  const MIB = 1_048_576;
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-q-bytes', 'pro');
  const created = await call(rt.url, 'GET', '/organizations/acct-q-bytes', { token: ADMIN_TOKEN });
  assert.equal(created.body.organization.ingest_bytes_per_second, null, 'unlimited unless set');
  for (const bad of [MIB - 1, 0, 1.5, 2 ** 40 + 1]) {
    const refused = await call(rt.url, 'PATCH', '/organizations/acct-q-bytes', { token: ADMIN_TOKEN, json: { ingest_bytes_per_second: bad } });
    assert.deepEqual([refused.status, refused.body.error.field], [400, 'ingest_bytes_per_second'], String(bad));
  }
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-bytes', { token: ADMIN_TOKEN, json: { ingest_bytes_per_second: MIB } })).body.organization.ingest_bytes_per_second, MIB);
  const source = await call(rt.url, 'POST', '/organizations/acct-q-bytes/sources', { token: key, json: { name: 'in', secrets: [SECRET], body_limit_bytes: 4 * MIB } });
  assert.equal(source.status, 201, source.text);
  /** A webhook whose payload is exactly `size` bytes of JSON, counted as received. */
  const hook = (id: string, size = 400_000) => {
    const head = JSON.stringify({ type: 'q.bytes', pad: '' });
    const body = head.replace('"pad":""', `"pad":"${'x'.repeat(size - head.length)}"`);
    assert.equal(Buffer.byteLength(body), size);
    return call(rt.url, 'POST', '/hooks/acct-q-bytes/in', { body, headers: signStandard(SECRET, id, Math.floor(clock.now() / 1000), body) });
  };
  assert.deepEqual([(await hook('b1')).status, (await hook('b2')).status], [204, 204]);
  const over = await hook('b3');
  assert.deepEqual([over.status, over.body.error.code, over.headers.get('retry-after')], [429, 'ingest_quota_exceeded', '1']);
  assert.match(over.body.error.message, /may send 1048576 payload bytes per second/);
  // A duplicate over the quota stores nothing and takes nothing: 409, as ever.
  assert.equal((await hook('b1')).status, 409);
  clock.advance(500);
  assert.equal((await hook('b3')).status, 204, 'half a second refilled half a MiB');
  // 1.5 MB, more than a second's: it waits for a full bucket, then goes, leaving it in debt.
  clock.advance(250);
  assert.equal((await hook('big', 1_500_000)).status, 429, 'the bucket is not full yet');
  clock.advance(1000);
  assert.equal((await hook('big', 1_500_000)).status, 204, 'a full bucket lets it through');
  clock.advance(500);
  assert.equal((await hook('b4')).status, 429, 'in debt: half a MiB refilled of the 451,424 bytes owed and 400,000 needed');
  clock.advance(500);
  assert.equal((await hook('b4')).status, 204);

  // A duplicate the store refuses (the bucket had room) gives its bytes back: two more fit after it.
  clock.advance(2000);
  assert.equal((await hook('b4')).status, 409);
  assert.deepEqual([(await hook('c1')).status, (await hook('c2')).status], [204, 204], 'the duplicate took nothing');

  // In a long byte debt a device still connects (its event is a few bytes), but its message waits,
  // and the answer names the longer wait.
  clock.advance(2000);
  assert.equal((await hook('huge', 3_000_000)).status, 204);
  const device = await call(rt.url, 'POST', '/organizations/acct-q-bytes/devices', { token: key, json: { name: 'till' } });
  assert.equal(device.status, 201, device.text);
  const socket = await connectDevice(rt.url, 'acct-q-bytes', 'till', device.body.token);
  socket.send({ id: 'sale-1', type: 'sale.made', payload: { items: 3 } });
  const nack = await socket.answerTo('sale-1');
  assert.deepEqual([nack.type, nack.error?.code, nack.retryable], ['nack', 'ingest_quota_exceeded', true]);
  socket.close(1000);
  await socket.closed;
  // With the event bucket empty too (1 event/s), the answer names the longer wait: the byte debt.
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-bytes', { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 1 } })).status, 200);
  clock.advance(3000);
  assert.equal((await hook('huge-2', 3_000_000)).status, 204);
  const longer = await hook('after-huge');
  assert.deepEqual([longer.status, longer.headers.get('retry-after')], [429, '3'], 'the byte debt (about 2.2 s) outlasts the event wait (1 s)');
  assert.match(longer.body.error.message, /payload bytes per second/);

  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-bytes', { token: ADMIN_TOKEN, json: { ingest_bytes_per_second: null, ingest_rate_per_second: null } })).body.organization.ingest_bytes_per_second, null);
  assert.equal((await hook('b5', 3_000_000)).status, 204, 'unlimited again');
  // An API event counts its payload's JSON text (the debt, kept while unlimited, is paid off by now).
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-q-bytes', { token: ADMIN_TOKEN, json: { ingest_bytes_per_second: MIB } })).status, 200);
  clock.advance(3000);
  const api = () => call(rt.url, 'POST', '/organizations/acct-q-bytes/events', { token: key, json: { type: 'q.api', payload: { note: 'y'.repeat(600_000) } } });
  assert.deepEqual([(await api()).status, (await api()).status], [202, 429]);
});

test('a quota lowered while requests wait out a sandbox reset holds them to the new rate when they are stored', async () => {
  const org = 'acct-q-waiting';
  const key = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: key, json: { name: 'sbx', secrets: [SECRET], environment: 'sandbox' } });
  const reset = holdReset(rt, org);
  const apiEvents = Array.from({ length: 5 }, (_, i) => call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'q.wait', payload: {}, id: `wait-${i}`, environment: 'sandbox' } }));
  const hooks = Array.from({ length: 5 }, (_, i) => {
    const body = JSON.stringify({ type: 'q.wait' });
    return call(rt.url, 'POST', `/hooks/${org}/sbx`, { body, headers: signStandard(SECRET, `wait-hook-${i}`, Math.floor(clock.now() / 1000), body) });
  });
  await reset.waitingFor(10);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 2 } })).status, 200);
  await reset.finish();
  const statuses = (await Promise.all([...apiEvents, ...hooks])).map((answer) => answer.status);
  assert.equal(statuses.filter((status) => status === 202 || status === 204).length, 2, `one second's burst at the new rate: ${statuses.join(' ')}`);
  assert.equal(statuses.filter((status) => status === 429).length, 8);
  const stored = await call(rt.url, 'GET', `/organizations/${org}/events?environment=sandbox`, { token: key });
  assert.equal(stored.body.events.length, 2);
});
