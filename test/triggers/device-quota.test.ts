// A device org's ingest quota on the real runtime (uWS, LMDB, real WebSocket clients): a connection
// costs two events, taken on credit; refused sockets are told moments one token apart and held to
// them; a socket that does not wait them out is closed (retry_after_ignored) and its device's
// connects paused. The devices themselves: devices.test.ts.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import WebSocket from 'ws';
import { ManualClock } from '../../runtime/clock.ts';
import { MAX_MESSAGES_IN_FLIGHT } from '../../runtime/triggers/device-frame.ts';
import { MAX_CONNECT_PAUSE_MS, MIN_CONNECT_PAUSE_MS } from '../../runtime/triggers/connect-pauses.ts';
import { connectDevice, type DeviceClient } from '../helpers/device-client.ts';
import { call, createOrg, registerDevice } from '../helpers/http.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
let rt: TestRuntime;

before(async () => {
  rt = await startRuntime({ clock });
});
after(async () => rt.close());

/** Connects the device (it must be let in) and closes the socket again. */
async function connectAndClose(org: string, name: string, token: string): Promise<void> {
  const device = await connectDevice(rt.url, org, name, token);
  device.close();
  await device.closed;
}

/** Creates `org` limited to `rate` events a second; answers its key. */
async function orgLimitedTo(org: string, rate: number): Promise<string> {
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { ingest_rate_per_second: rate } })).status, 200);
  return orgKey;
}

test('a connection counts as two events against the org ingest quota (its device.connected and its device.disconnected): a reconnect loop stores no more than the rate', async () => {
  const org = 'acct-devices-reconnects';
  const orgKey = await orgLimitedTo(org, 4);
  const token = await registerDevice(rt.url, org, orgKey, 'blinker');
  // Two connections spend this second's four events; a third takes its two on credit (a connect
  // needs both at once), and the org's next events wait that debt out.
  for (let round = 0; round < 3; round += 1) {
    await connectAndClose(org, 'blinker', token);
  }
  const refused = await connectDevice(rt.url, org, 'blinker', token).catch((error: { status: number }) => error);
  assert.equal((refused as { status: number }).status, 429, 'in debt: no more credit');
  const events = async (): Promise<number> => (await call(rt.url, 'GET', `/organizations/${org}/events?source=${encodeURIComponent('@device:blinker')}`, { token: orgKey })).body.events.length;
  assert.equal(await eventually('the three endings stored', events, (n) => n === 6), 6);
  // Half a second at 4 a second pays the debt off: a connect gets in again.
  clock.advance(500);
  await connectAndClose(org, 'blinker', token);
});

test('over the org ingest quota a connect is refused (429) and a message gets a retryable nack with retry_after_ms; nothing is stored', async () => {
  const org = 'acct-devices-quota';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const limited = await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 1 } });
  assert.equal(limited.status, 200, limited.text);
  const token = await registerDevice(rt.url, org, orgKey, 'meter');
  const device = await connectDevice(rt.url, org, 'meter', token);
  // The connect took two events, its device.connected and its device.disconnected to come (two
  // seconds at this rate): a second connect now is refused.
  const refused = await connectDevice(rt.url, org, 'meter', token).catch((error: { status: number; body: string }) => error);
  assert.equal((refused as { status: number }).status, 429);
  assert.equal(JSON.parse((refused as { body: string }).body).error.code, 'ingest_quota_exceeded');
  assert.equal(device.socket.readyState, WebSocket.OPEN, 'the refused connect did not replace the open one');
  clock.advance(2000);
  device.send({ id: 'q-1', type: 'reading.taken' });
  assert.equal((await device.answerTo('q-1')).type, 'ack');
  device.send({ id: 'q-2', type: 'reading.taken' });
  const nack = await device.answerTo('q-2');
  assert.deepEqual([nack.type, nack.error.code, nack.retryable], ['nack', 'ingest_quota_exceeded', true]);
  assert.ok(nack.retry_after_ms > 0);
  clock.advance(1000);
  device.send({ id: 'q-2', type: 'reading.taken' });
  await device.waitFor(() => device.frames.filter((f) => f.id === 'q-2').length === 2, 'the retry');
  const retried = device.frames.filter((f) => f.id === 'q-2')[1]!;
  assert.deepEqual([retried.type, retried.duplicate], ['ack', false], 'the same id is stored on retry: the nack stored nothing');
  const stored = await call(rt.url, 'GET', `/organizations/${org}/events?type=reading.taken&source=${encodeURIComponent('@device:meter')}`, { token: orgKey });
  assert.deepEqual(stored.body.events.map((e: { provider_event_id: string }) => e.provider_event_id).sort(), ['q-1', 'q-2']);
  device.close();
  await device.closed;
});

test('a device connects while another device of its org keeps the ingest quota used up: a connect takes its two events on credit', async () => {
  const org = 'acct-devices-starved';
  const orgKey = await orgLimitedTo(org, 4);
  const busyToken = await registerDevice(rt.url, org, orgKey, 'busy');
  const lateToken = await registerDevice(rt.url, org, orgKey, 'late');
  const busy = await connectDevice(rt.url, org, 'busy', busyToken);
  for (const id of ['b-1', 'b-2']) {
    busy.send({ id, type: 'reading.taken' });
    assert.equal((await busy.answerTo(id)).type, 'ack');
  }
  busy.send({ id: 'b-3', type: 'reading.taken' });
  assert.equal((await busy.answerTo('b-3')).error.code, 'ingest_quota_exceeded', 'the quota is used up');
  // Not one token left, as when messages retried at each refill take every one: the connect gets in.
  const late = await connectDevice(rt.url, org, 'late', lateToken);
  busy.send({ id: 'b-3', type: 'reading.taken' });
  await busy.waitFor(() => busy.frames.filter((f) => f.id === 'b-3').length === 2, 'the retry');
  const retried = busy.frames.filter((f) => f.id === 'b-3')[1]!;
  assert.deepEqual([retried.type, retried.error?.code], ['nack', 'ingest_quota_exceeded'], 'the messages wait out the connect\'s debt');
  assert.ok(retried.retry_after_ms >= 500 && retried.retry_after_ms < 1000, `${retried.retry_after_ms} ms: two events of debt and one to take, at 4 a second`);
  assert.match(retried.error.message, new RegExp(`retry after ${retried.retry_after_ms} ms\\.$`), 'the message says the wait its field says');
  for (const device of [busy, late]) {
    device.close();
    await device.closed;
  }
});

/** Two connected devices of a new `org` of ten events a second, its second of burst spent. */
async function twoDevicesOnSpentQuota(org: string): Promise<[DeviceClient, DeviceClient]> {
  const orgKey = await orgLimitedTo(org, 10);
  const [first, second] = await Promise.all(['first', 'second'].map(async (name) => connectDevice(rt.url, org, name, await registerDevice(rt.url, org, orgKey, name))));
  // Ten a second, a second of burst: the two connects took four; six messages take the rest.
  for (let i = 1; i <= 6; i += 1) {
    first!.send({ id: `spent-${i}`, type: 'reading.taken' });
    assert.equal((await first!.answerTo(`spent-${i}`)).type, 'ack');
  }
  return [first!, second!];
}

test('sockets of one org its quota refuses are told moments one token apart; a socket refused again before its moment is told the same one', async () => {
  const [first, second] = await twoDevicesOnSpentQuota('acct-devices-stagger');
  const refusal = async (device: DeviceClient, id: string): Promise<number> => {
    device.send({ id, type: 'reading.taken' });
    const nack = await device.answerTo(id);
    assert.equal(nack.error?.code, 'ingest_quota_exceeded', JSON.stringify(nack));
    return nack.retry_after_ms as number;
  };
  const firstWait = await refusal(first, 'r-1');
  assert.equal(firstWait, 100, 'the next token');
  assert.equal(await refusal(second, 'r-2'), 200, 'the other socket: the token after');
  assert.equal(await refusal(first, 'r-3'), 100, 'the first socket again: its own moment, which moves no one');
  assert.equal(await refusal(second, 'r-4'), 200);
  clock.advance(100);
  first.send({ id: 'r-1', type: 'reading.taken' });
  await first.waitFor(() => first.frames.filter((f) => f.id === 'r-1').length === 2, 'the retry');
  assert.equal(first.frames.filter((f) => f.id === 'r-1')[1]!.type, 'ack', 'back at its moment, the token is there');
  for (const device of [first, second]) {
    device.close();
    await device.closed;
  }
});

/** Sends message `id` (again) and answers the `nth` answer to that id. */
async function answer(device: DeviceClient, id: string, nth: number): Promise<{ type: string; retry_after_ms?: number; error?: { code: string } }> {
  device.send({ id, type: 'reading.taken' });
  await device.waitFor(() => device.frames.filter((f) => f.id === id).length === nth, `answer ${nth} to ${id}`);
  return device.frames.filter((f) => f.id === id)[nth - 1]!;
}

test('a socket the quota refused is held to its moment: the token back before it goes to the socket whose moment came, not to one that sends again at once', async () => {
  const [first, second] = await twoDevicesOnSpentQuota('acct-devices-held');
  assert.equal((await answer(first, 'wait-1', 1)).retry_after_ms, 100);
  assert.equal((await answer(second, 'wait-2', 1)).retry_after_ms, 200);
  clock.advance(100);
  const early = await answer(second, 'wait-2', 2);
  assert.equal(early.error?.code, 'ingest_quota_exceeded', 'the token is back, but it is not this socket\'s moment');
  assert.equal(early.retry_after_ms, 100, 'told its own moment again');
  assert.equal((await answer(first, 'wait-1', 2)).type, 'ack', 'the socket whose moment came finds its token');
  clock.advance(100);
  assert.equal((await answer(second, 'wait-2', 3)).type, 'ack', 'and the other at its own');
  for (const device of [first, second]) {
    device.close();
    await device.closed;
  }
});

test('a socket held just before its moment, whose nack goes out after the moment passed (a duplicate check in between), is told that moment, not a new one behind the other sockets\'', async () => {
  const [first, second] = await twoDevicesOnSpentQuota('acct-devices-held-late');
  assert.equal((await answer(first, 'late-1', 1)).retry_after_ms, 100);
  assert.equal((await answer(second, 'late-2', 1)).retry_after_ms, 200);
  clock.advance(100);
  assert.equal((await answer(first, 'late-1', 2)).type, 'ack');
  assert.equal((await answer(first, 'late-3', 1)).retry_after_ms, 200, 'the first socket again: the slot after the second\'s');
  // The second socket, 100 ms before its moment: held. The clock passes its moment while the
  // refusal checks for a duplicate.
  const gate = gateNextCall(rt.runtime.context.events, 'refuseDuplicate');
  try {
    second.send({ id: 'late-2', type: 'reading.taken' });
    await gate.whenReached;
    clock.advance(150);
    gate.release();
    await second.waitFor(() => second.frames.filter((f) => f.id === 'late-2').length === 2, 'the held refusal');
  } finally {
    gate.done();
  }
  assert.equal(second.frames.filter((f) => f.id === 'late-2')[1]!.retry_after_ms, 100, 'its own moment as it was when held (a new one comes after the first socket\'s: 150)');
  for (const device of [first, second]) {
    device.close();
    await device.closed;
  }
});

/**
 * Opens the device's socket and sends its messages again and again without waiting out the quota
 * nacks (the clock stands still), until it is closed; answers the socket and the nacks it got.
 */
async function sendWithoutWaiting(org: string, name: string, token: string): Promise<{ device: DeviceClient; refused: number }> {
  const device = await connectDevice(rt.url, org, name, token);
  let refused = 0;
  for (let round = 0; round < 4 && device.socket.readyState === WebSocket.OPEN; round += 1) {
    const ids = Array.from({ length: MAX_MESSAGES_IN_FLIGHT }, (_, i) => `again-${i}`);
    await device.sendAtOnce(ids.map((id) => JSON.stringify({ id, type: 'reading.taken' })));
    await device.waitFor(() => device.frames.filter((frame) => frame.type === 'nack').length >= refused + ids.length || device.socket.readyState !== WebSocket.OPEN, 'the round\'s nacks');
    refused = device.frames.filter((frame) => frame.type === 'nack').length;
  }
  return { device, refused };
}

test('a socket that sends again before the wait its quota nacks named, more than twice its messages in flight, is closed (1008, retry_after_ignored), and its device\'s connects wait that moment out (429 connect_paused)', async () => {
  const org = 'acct-devices-impatient';
  // One a second, and the clock stands still here: every refusal after the first comes before the moment it named.
  const orgKey = await orgLimitedTo(org, 1);
  const token = await registerDevice(rt.url, org, orgKey, 'impatient');
  const { device, refused } = await sendWithoutWaiting(org, 'impatient', token);
  assert.ok(device.frames.filter((frame) => frame.type === 'nack').every((frame) => frame.error.code === 'ingest_quota_exceeded'));
  assert.equal(refused, 2 * MAX_MESSAGES_IN_FLIGHT + 2, 'the refusal that named the moment, twice the messages in flight before it, and the one past that');
  assert.deepEqual(await device.closed, { code: 1008, reason: `messages sent again before the retry_after_ms their nacks named (${2 * MAX_MESSAGES_IN_FLIGHT + 1} refused in that wait); wait it out` });
  await eventually('the ending stored', async () => (await call(rt.url, 'GET', `/organizations/${org}/devices/impatient`, { token: orgKey })).body.device.last_disconnect_reason, (reason) => reason === 'retry_after_ignored');

  // Its device's connects wait out the moment it was told, refused before they cost the quota or a write.
  const lastNack = device.frames.filter((frame) => frame.type === 'nack').at(-1)!;
  const toldMs: number = lastNack.retry_after_ms;
  assert.ok(toldMs > MIN_CONNECT_PAUSE_MS, `${toldMs} ms: the connect's two events on credit push the moment past the least pause`);
  const storedEvents = async (): Promise<number> => (await call(rt.url, 'GET', `/organizations/${org}/events?limit=500`, { token: orgKey })).body.events.length;
  const before = await storedEvents();
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const paused = (await connectDevice(rt.url, org, 'impatient', token).catch((error: unknown) => error)) as { status: number; body: string; retryAfter: string };
    assert.equal(paused.status, 429, 'connected during its pause');
    assert.equal(JSON.parse(paused.body).error.code, 'connect_paused');
    assert.equal(paused.retryAfter, String(Math.ceil(toldMs / 1000)));
  }
  assert.equal(await storedEvents(), before, 'the refused connects stored nothing');
  // Quota to spare from here on (a new rate starts a full bucket): what refuses the device now is its pause alone.
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 1000 } })).status, 200);
  await connectAndClose(org, 'patient', await registerDevice(rt.url, org, orgKey, 'patient'));
  clock.advance(toldMs - 1);
  const justBefore = (await connectDevice(rt.url, org, 'impatient', token).catch((error: unknown) => error)) as { body: string };
  assert.equal(JSON.parse(justBefore.body).error.code, 'connect_paused', 'a millisecond before the moment');
  clock.advance(1);
  await connectAndClose(org, 'impatient', token);
});

/** A device `name` of a new `org` (one event a second) whose socket was closed retry_after_ignored, its ending stored: paused. */
async function pausedDevice(org: string, name: string): Promise<{ orgKey: string; token: string }> {
  const orgKey = await orgLimitedTo(org, 1);
  const token = await registerDevice(rt.url, org, orgKey, name);
  const { device } = await sendWithoutWaiting(org, name, token);
  assert.equal((await device.closed).code, 1008);
  await eventually('the ending stored', async () => (await call(rt.url, 'GET', `/organizations/${org}/devices/${name}`, { token: orgKey })).body.device.last_disconnect_reason, (reason) => reason === 'retry_after_ignored');
  return { orgKey, token };
}

test('a device paused lately connects only once the quota holds its two events; devices never paused connect on credit meanwhile', async () => {
  const org = 'acct-devices-no-credit';
  const { orgKey, token } = await pausedDevice(org, 'greedy');
  clock.advance(MAX_CONNECT_PAUSE_MS);
  // Its pause is over. Two events a second, a new rate's bucket full, and a polite device takes them.
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 2 } })).status, 200);
  await connectAndClose(org, 'polite', await registerDevice(rt.url, org, orgKey, 'polite'));
  const refused = (await connectDevice(rt.url, org, 'greedy', token).catch((error: unknown) => error)) as { status: number; body: string; retryAfter: string };
  assert.equal(refused.status, 429, 'connected on credit');
  assert.equal(JSON.parse(refused.body).error.code, 'ingest_quota_exceeded');
  assert.equal(refused.retryAfter, '1');
  // The bucket is empty, not in debt: a device never paused still connects on credit.
  await connectAndClose(org, 'polite-2', await registerDevice(rt.url, org, orgKey, 'polite-2'));
  clock.advance(1_000);
  assert.equal(((await connectDevice(rt.url, org, 'greedy', token).catch((error: unknown) => error)) as { status: number }).status, 429, 'the debt paid off, none there yet');
  clock.advance(1_000);
  await connectAndClose(org, 'greedy', token);
});

test('a device deleted and made again under the name of a paused one is not paused: the pause was the old device\'s', async () => {
  const org = 'acct-devices-reborn';
  const { orgKey, token: oldToken } = await pausedDevice(org, 'reborn');
  // Quota to spare: only a pause could refuse the connects below.
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 1000 } })).status, 200);
  const paused = (await connectDevice(rt.url, org, 'reborn', oldToken).catch((error: unknown) => error)) as { body: string };
  assert.equal(JSON.parse(paused.body).error.code, 'connect_paused');
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${org}/devices/reborn`, { token: orgKey })).status, 204);
  await connectAndClose(org, 'reborn', await registerDevice(rt.url, org, orgKey, 'reborn'));
});
