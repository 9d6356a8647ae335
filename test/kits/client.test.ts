// The TypeScript client (kits/client) against a real runtime that is stopped and started again on
// the same port and data dir: events sent through it are stored once however often they are
// retried; a live subscription resumes after the restart and gets each update once; a device
// connection queues messages while Sluice is down and each is stored once after it comes back.
// Waits between attempts go through an injected sleep that moves the runtime's manual clock.

import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, test } from 'node:test';
import { connectDevice, DeviceError, LiveClosedError, SluiceApiError, SluiceClient, SluiceNetworkError, watchRuns, type RunUpdate, type Sleep } from '../../kits/client/index.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { keyWithRole } from '../actions/action-fixtures.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-client';
const clock = new ManualClock(Date.UTC(2026, 10, 30, 15, 0, 0));
const dataDir = tempDir();
let port: number;
let rt: TestRuntime | undefined;
let receiver: Receiver;
let key: string;
let url: string;
/** Every wait the client asked for, in ms. */
const waits: number[] = [];
/** Moves the manual clock by the wait, and yields for a moment of real time so sockets can make progress. */
const sleep: Sleep = async (ms) => {
  waits.push(ms);
  clock.advance(ms);
  await new Promise((resolve) => setTimeout(resolve, 10));
};

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port: free } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return free;
}

const start = async (): Promise<void> => {
  rt = await startRuntime({ clock, dataDir, args: ['--port', String(port)] });
};
const stop = async (): Promise<void> => {
  await rt?.close();
  rt = undefined;
};

before(async () => {
  port = await freePort();
  await start();
  url = rt!.url;
  receiver = await startReceiver();
  key = await createOrg(url, ADMIN_TOKEN, ORG);
  const wf = await call(url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'notify', trigger_event: 'order.paid', steps: [{ id: 'post', type: 'webhook', url: `${receiver.url}/paid` }] } });
  assert.equal(wf.status, 201, wf.text);
});
after(async () => {
  await stop();
  await receiver.close();
});

test('sendEvent stores once however often it is sent; pages are walked; errors carry code and field', async () => {
  const client = new SluiceClient({ url, apiKey: key, org: ORG, sleep });
  const first = await client.sendEvent({ type: 'note.added', id: 'note-1', payload: { n: 1 } });
  assert.deepEqual(first, { event_id: 'note-1', duplicate: false });
  assert.deepEqual(await client.sendEvent({ type: 'note.added', id: 'note-1', payload: { n: 1 } }), { event_id: 'note-1', duplicate: true });
  // The id held by another event (another payload, type or environment) is no duplicate: the 409 is thrown.
  for (const other of [{ type: 'note.added', payload: { n: 2 } }, { type: 'note.removed', payload: { n: 1 } }]) {
    await assert.rejects(client.sendEvent({ ...other, id: 'note-1' }), (error: unknown) => error instanceof SluiceApiError && error.status === 409 && error.code === 'duplicate_event');
  }
  const generated = await client.sendEvent({ type: 'note.added', payload: { n: 2 } });
  assert.match(generated.event_id, /^cli_/);
  for (let n = 3; n <= 5; n++) await client.sendEvent({ type: 'note.added', payload: { n } });
  const seen: unknown[] = [];
  for await (const event of client.events({ type: 'note.added', pageSize: 2 })) seen.push((event.payload as { n: number }).n);
  assert.deepEqual(seen.sort(), [1, 2, 3, 4, 5], 'every event once, across three pages');
  assert.equal((await client.getEvent('note-1')).event.type, 'note.added');

  const refused = await client.sendEvent({ type: 'has space', payload: {} }).catch((error: unknown) => error);
  assert.ok(refused instanceof SluiceApiError);
  assert.deepEqual([refused.status, refused.code, refused.field], [400, 'invalid_request', 'type']);
  const missing = await client.getRun('run_missing').catch((error: unknown) => error);
  assert.ok(missing instanceof SluiceApiError && missing.status === 404);
});

test("requestWithHeaders gives the answer's ETag: a PATCH with it as If-Match applies, a second with the same stale tag is 412 naming the current one", async () => {
  const client = new SluiceClient({ url, apiKey: key, org: ORG, sleep });
  const created = await client.requestWithHeaders<{ source: { name: string } }>('POST', '/sources', { json: { name: 'crm', secrets: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'] } });
  assert.equal(created.status, 201);
  assert.equal(created.body.source.name, 'crm');
  const read = await client.requestWithHeaders('GET', '/sources/crm');
  const tag = read.headers.get('etag');
  assert.ok(tag !== null && tag === created.headers.get('etag'), `the ETag read (${tag}) is the one created`);
  const changed = await client.requestWithHeaders<{ source: { body_limit_bytes: number } }>('PATCH', '/sources/crm', { json: { body_limit_bytes: 4096 }, headers: { 'if-match': tag } });
  assert.equal(changed.body.source.body_limit_bytes, 4096);
  assert.notEqual(changed.headers.get('etag'), tag, 'the change moved the tag on');
  const stale = await client.request('PATCH', '/sources/crm', { json: { body_limit_bytes: 8192 }, headers: { 'if-match': tag } }).catch((error: unknown) => error);
  assert.ok(stale instanceof SluiceApiError, String(stale));
  assert.deepEqual([stale.status, stale.code, stale.details['current_etag']], [412, 'etag_mismatch', changed.headers.get('etag')]);
  // `request` answers the same body, without the headers.
  assert.deepEqual(await client.request('GET', '/sources/crm'), (await client.requestWithHeaders('GET', '/sources/crm')).body);
});

test('over the ingest quota the client waits the Retry-After the server gave, then the event is stored', async () => {
  const org = 'acct-client-quota';
  const orgKey = await createOrg(url, ADMIN_TOKEN, org);
  assert.equal((await call(url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 1 } })).status, 200);
  const client = new SluiceClient({ url, apiKey: orgKey, org, sleep });
  await client.sendEvent({ type: 'tick', id: 'q-1', payload: {} });
  waits.length = 0;
  assert.deepEqual(await client.sendEvent({ type: 'tick', id: 'q-2', payload: {} }), { event_id: 'q-2', duplicate: false });
  assert.deepEqual(waits, [1000], 'one wait, of the 1 s the 429 asked for');

  const unreachable = new SluiceClient({ url: `http://127.0.0.1:${await freePort()}`, apiKey: orgKey, org, sleep, maxAttempts: 3 });
  waits.length = 0;
  await assert.rejects(unreachable.sendEvent({ type: 'tick', payload: {} }), (error: unknown) => error instanceof SluiceNetworkError && error.code === 'network_error' && error.cause instanceof TypeError);
  assert.equal(waits.length, 2, 'three attempts, two waits between them');
});

test('a live subscription resumes after a restart with each update once, reloads after a sandbox reset, and ends on a revoked key', async () => {
  const client = new SluiceClient({ url, apiKey: key, org: ORG, sleep });
  const updates: RunUpdate[] = [];
  // The subscription's waits can be held, to keep it away while things happen that it must replay.
  let hold: Promise<void> | undefined;
  const heldSleep: Sleep = async (ms) => {
    await hold;
    await sleep(ms);
  };
  const live = watchRuns({ url, apiKey: key, org: ORG, onUpdate: (update) => updates.push(update), sleep: heldSleep });
  await eventually('the first heartbeat', () => live.position, (position) => position !== undefined);
  const { event_id: before } = await client.sendEvent({ type: 'order.paid', payload: { order: 1 } });
  await eventually('the first run completed', () => updates.some((u) => u.event_id === before && u.state === 'completed'), Boolean);

  let release: () => void = () => undefined;
  hold = new Promise((resolve) => (release = resolve));
  await stop();
  await start();
  // The second run completes while the subscription is still away: it gets those updates by replay.
  const { event_id: afterRestart } = await client.sendEvent({ type: 'order.paid', payload: { order: 2 } });
  await eventually('the second run completed', async () => (await client.getEvent(afterRestart)).reactions[0]?.state, (state) => state === 'completed');
  assert.ok(!updates.some((u) => u.event_id === afterRestart), 'not seen live');
  release();
  await eventually('the second run replayed', () => updates.some((u) => u.event_id === afterRestart && u.state === 'completed'), Boolean, 15_000);
  const seqs = updates.map((u) => u.seq);
  assert.equal(new Set(seqs).size, seqs.length, 'no update twice');
  live.close();
  await live.done;

  const sandboxUpdates: RunUpdate[] = [];
  const reloads: string[] = [];
  const sandboxWf = await call(url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'sb', environment: 'sandbox', trigger_event: 'order.paid', steps: [{ id: 'post', type: 'webhook', url: `${receiver.url}/sb` }] } });
  assert.equal(sandboxWf.status, 201, sandboxWf.text);
  const sandbox = watchRuns({ url, apiKey: key, org: ORG, environment: 'sandbox', onUpdate: (u) => sandboxUpdates.push(u), onReload: (reason) => void reloads.push(reason), sleep });
  await eventually('joined', () => sandbox.position, (position) => position !== undefined);
  assert.equal((await call(url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key })).status, 200);
  await eventually('the reload request', () => reloads, (r) => r.length === 1);
  assert.deepEqual(reloads, ['sandbox_reset']);
  const { event_id: sandboxEvent } = await client.sendEvent({ type: 'order.paid', payload: {}, environment: 'sandbox' });
  await eventually('a sandbox run after the reset', () => sandboxUpdates.some((u) => u.event_id === sandboxEvent && u.state === 'completed'), Boolean);
  sandbox.close();

  const viewer = await keyWithRole(url, ORG, key, 'viewer');
  const revocable = watchRuns({ url, apiKey: viewer.key, org: ORG, onUpdate: () => undefined, sleep });
  await eventually('joined', () => revocable.position, (position) => position !== undefined);
  assert.equal((await call(url, 'DELETE', `/organizations/${ORG}/api-keys/${viewer.id}`, { token: key })).status, 200);
  await assert.rejects(revocable.done, (error: unknown) => error instanceof LiveClosedError && error.code === 4401);
});

test('a device connection holds messages while Sluice is down and each is stored once after it is back; a bad one is rejected', async () => {
  const created = await call(url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'till-1' } });
  assert.equal(created.status, 201, created.text);
  const device = connectDevice({ url, org: ORG, device: 'till-1', token: created.body.token, sleep });
  const firstAcks = await Promise.all(Array.from({ length: 10 }, (_, i) => device.send({ id: `sale-${i}`, type: 'sale.made', payload: { i } })));
  assert.ok(firstAcks.every((ack) => !ack.duplicate && ack.event_id.startsWith('evt_')));

  await stop();
  await eventually('the drop noticed', () => device.connected, (connected) => !connected);
  const later = Array.from({ length: 10 }, (_, i) => device.send({ id: `sale-${10 + i}`, type: 'sale.made', payload: { i: 10 + i } }));
  assert.equal(device.pending, 10, 'held while Sluice is down');
  await start();
  await Promise.all(later);
  assert.equal(device.pending, 0);
  const client = new SluiceClient({ url, apiKey: key, org: ORG, sleep });
  const ids: string[] = [];
  for await (const event of client.events({ type: 'sale.made', pageSize: 100 })) ids.push(String(event['provider_event_id']));
  assert.deepEqual(ids.sort(), Array.from({ length: 20 }, (_, i) => `sale-${i}`).sort(), 'each message once');

  const refused = await device.send({ type: 'has space' }).catch((error: unknown) => error);
  assert.ok(refused instanceof DeviceError);
  assert.deepEqual([refused.code, refused.field], ['invalid_message', 'type']);

  assert.equal((await call(url, 'POST', `/organizations/${ORG}/devices/till-1/token`, { token: key })).status, 200);
  await assert.rejects(device.done, (error: unknown) => error instanceof DeviceError && error.code === 'closed_4401');
  await assert.rejects(device.send({ type: 'sale.made' }), DeviceError, 'a connection ended for good takes no more messages');
});

test("over a starter org's quota a device connection paces itself: every message stored once, a few nacks per message at most", async () => {
  const org = 'acct-client-paced';
  const orgKey = await createOrg(url, ADMIN_TOKEN, org, 'starter');
  const created = await call(url, 'POST', `/organizations/${org}/devices`, { token: orgKey, json: { name: 'meter' } });
  assert.equal(created.status, 201, created.text);
  let nacks = 0;
  // Each retryable nack makes one wait. Waits that overlap take the time of the longest, as real
  // ones would (adding them up, as the shared sleep does, would refill the quota by their sum).
  const countingSleep: Sleep = async (ms) => {
    nacks++;
    const end = clock.now() + ms;
    await new Promise((resolve) => setTimeout(resolve, 10));
    if (clock.now() < end) clock.set(end);
  };
  const device = connectDevice({ url, org, device: 'meter', token: created.body.token, sleep: countingSleep });
  try {
    // The starter quota is 100 a second with one second of burst: most of these meet it.
    const acks = await Promise.all(Array.from({ length: 400 }, (_, i) => device.send({ id: `reading-${i}`, type: 'meter.read', payload: { i } })));
    assert.equal(new Set(acks.map((ack) => ack.event_id)).size, 400, 'each stored once');
    assert.ok(nacks >= 100, `the quota was met (${nacks} nacks)`);
    // Paced, a refusal costs a nack or two per message (as `sluice device`); unpaced, every wait ended
    // with the whole window sent into the same refusal: 31,509 nacks for these 400.
    assert.ok(nacks <= 3 * 400, `${nacks} nacks for 400 messages: the whole window went into each refusal`);
  } finally {
    device.close();
  }
});

test('a live subscription and a device connection of an org that is deleted end for good (4404)', async () => {
  const GONE = 'acct-client-gone';
  const goneKey = await createOrg(url, ADMIN_TOKEN, GONE);
  const created = await call(url, 'POST', `/organizations/${GONE}/devices`, { token: goneKey, json: { name: 'till-9' } });
  assert.equal(created.status, 201, created.text);
  const device = connectDevice({ url, org: GONE, device: 'till-9', token: created.body.token, sleep });
  await device.send({ id: 'sale-1', type: 'sale.made', payload: {} });
  const watching = watchRuns({ url, apiKey: goneKey, org: GONE, onUpdate: () => undefined, sleep });
  await eventually('joined', () => watching.position, (position) => position !== undefined);
  assert.equal((await call(url, 'DELETE', `/organizations/${GONE}`, { token: ADMIN_TOKEN })).status, 202);
  await assert.rejects(watching.done, (error: unknown) => error instanceof LiveClosedError && error.code === 4404);
  await assert.rejects(device.done, (error: unknown) => error instanceof DeviceError && error.code === 'closed_4404');
  await rt!.runtime.deletions.idle();
});
