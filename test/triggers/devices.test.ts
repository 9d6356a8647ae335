// Devices on the real runtime (uWS, LMDB, real WebSocket clients): registering them, their token
// checked at the socket, each connection's opening and ending sent once as events, each message
// stored once as an event (acknowledged when durable, deduplicated by its id), bad frames nacked
// with a reason while the socket stays, and rotation, deletion and a newer connection closing it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request as httpRequest } from 'node:http';
import WebSocket from 'ws';
import { ManualClock } from '../../runtime/clock.ts';
import { leadingFrameId, MAX_MESSAGES_IN_FLIGHT } from '../../runtime/triggers/device-frame.ts';
import { REFUSAL_MS, REFUSALS_PER_SECOND } from '../../runtime/triggers/device-messages.ts';
import { keyWithRole } from '../actions/action-fixtures.ts';
import { connectDevice, type DeviceClient } from '../helpers/device-client.ts';
import { call, createOrg, registerDevice } from '../helpers/http.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
let rt: TestRuntime;
let receiver: Receiver;
let key: string;
const ORG = 'acct-devices';
const devicesPath = `/organizations/${ORG}/devices`;

before(async () => {
  // Reading takes no time by this clock: each refused frame counts once (one that takes long is tested on its own).
  rt = await startRuntime({ clock, deviceReadingClock: () => 0 });
  receiver = await startReceiver();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'readings', trigger_event: 'reading.taken', steps: [{ id: 'post', type: 'webhook', url: `${receiver.url}/reading` }] } });
  assert.equal(wf.status, 201, wf.text);
});
after(async () => {
  await rt.close();
  await receiver.close();
});

/** Registers a device; answers its token. */
const register = (name: string, json: Record<string, unknown> = {}, org = ORG, token = key): Promise<string> => registerDevice(rt.url, org, token, name, json);

/** The org's events of `type` from device `name`, oldest first. */
async function deviceEvents(name: string, type: string, environment = 'production'): Promise<Array<{ id: string; source: string; provider_event_id: string | null; payload: Record<string, unknown> }>> {
  const listed = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=${type}&environment=${environment}&source=${encodeURIComponent(`@device:${name}`)}&limit=500`, { token: key });
  assert.equal(listed.status, 200, listed.text);
  assert.ok(listed.body.events.every((e: { source: string }) => e.source === `@device:${name}`), 'the source filter keeps only that device');
  return listed.body.events.reverse();
}

test('registering: the token is shown once, names and roles are checked, another org sees nothing', async () => {
  const created = await call(rt.url, 'POST', devicesPath, { token: key, json: { name: 'kiosk-1' } });
  assert.equal(created.status, 201, created.text);
  assert.match(created.body.token, /^sdt_/);
  assert.equal(created.body.device.token_prefix, created.body.token.slice(0, 12));
  assert.equal(created.body.device.state, 'disconnected');
  assert.equal(created.body.device.socket_path, `/devices/${ORG}/kiosk-1`);
  const read = await call(rt.url, 'GET', `${devicesPath}/kiosk-1`, { token: key });
  assert.equal(read.status, 200);
  assert.ok(!read.text.includes(created.body.token) && !read.text.includes('token_hash'), 'neither the token nor its hash is shown again');

  assert.equal((await call(rt.url, 'POST', devicesPath, { token: key, json: { name: 'kiosk-1' } })).body.error.code, 'device_exists');
  const badName = await call(rt.url, 'POST', devicesPath, { token: key, json: { name: 'Kiosk One' } });
  assert.equal(badName.status, 400);
  assert.equal(badName.body.error.field, 'name');
  const viewer = await keyWithRole(rt.url, ORG, key, 'viewer');
  assert.equal((await call(rt.url, 'POST', devicesPath, { token: viewer.key, json: { name: 'kiosk-2' } })).status, 403);
  assert.equal((await call(rt.url, 'GET', devicesPath, { token: viewer.key })).status, 200, 'a viewer reads');

  const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-devices-other');
  assert.equal((await call(rt.url, 'GET', `${devicesPath}/kiosk-1`, { token: otherKey })).status, 404);
  // Another org's device token does not open this org's device, nor the other way round.
  const otherToken = await register('kiosk-1', {}, 'acct-devices-other', otherKey);
  await assert.rejects(connectDevice(rt.url, ORG, 'kiosk-1', otherToken), { status: 401 });
  await assert.rejects(connectDevice(rt.url, 'acct-devices-other', 'kiosk-1', created.body.token), { status: 401 });

  const sandbox = await register('kiosk-sb', { environment: 'sandbox' });
  assert.ok(sandbox.length > 0);
  const production = await call(rt.url, 'GET', devicesPath, { token: key });
  assert.ok(!production.body.devices.some((d: { name: string }) => d.name === 'kiosk-sb'), 'lists are scoped to one environment');
  assert.equal((await call(rt.url, 'GET', `${devicesPath}/kiosk-sb`, { token: key })).status, 404, 'a sandbox device is not found in production');
  assert.equal((await call(rt.url, 'GET', `${devicesPath}/kiosk-sb?environment=sandbox`, { token: key })).status, 200);
});

test('the socket refuses a missing or wrong token, and an unknown org or device, alike (401: names cannot be probed), an unknown or repeated query parameter (400), and a plain GET (426)', async () => {
  const token = await register('gate-1');
  await assert.rejects(connectDevice(rt.url, ORG, 'gate-1', undefined), { status: 401 });
  await assert.rejects(connectDevice(rt.url, ORG, 'gate-1', `${token}x`), { status: 401 });
  await assert.rejects(connectDevice(rt.url, ORG, 'gate-404', token), { status: 401 });
  await assert.rejects(connectDevice(rt.url, 'acct-no-such-org', 'gate-1', token), { status: 401 });
  const refusedWith = (code: string) => (error: { status?: number; body?: string }) => error.status === 400 && error.body?.includes(`"${code}"`) === true;
  await assert.rejects(connectDevice(rt.url, ORG, 'gate-1', token, { extraQuery: 'toekn=x' }), refusedWith('unknown_query_parameter'));
  await assert.rejects(connectDevice(rt.url, ORG, 'gate-1', token, { extraQuery: 'token=other' }), refusedWith('repeated_query_parameter'));
  const plain = await call(rt.url, 'GET', `/devices/${ORG}/gate-1`);
  assert.equal(plain.status, 426);
  assert.equal(plain.body.error.code, 'upgrade_required');
  assert.equal(plain.headers.get('upgrade'), 'websocket', 'RFC 9110: a 426 names the protocol to switch to');
  // A WebSocket client on a path that is not exact (a trailing slash) is told the exact path, not to use a WebSocket client.
  const refused = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const socket = new WebSocket(`${rt.url.replace('http', 'ws')}/devices/${ORG}/gate-1/?token=${token}`, ['sluice-device']);
    socket.once('unexpected-response', (_request, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    socket.once('open', () => reject(new Error('opened')));
    socket.once('error', () => undefined);
  });
  assert.equal(refused.status, 404);
  assert.match(refused.body, /open \/devices\/<org>\/<device name> exactly/);
  // An upgrade request at the exact path that uWS did not take (no Sec-WebSocket-Key) is not told to fix its path.
  assert.equal(await refusedStatus(`${rt.url}/devices/${ORG}/gate-1`, 'GET', { connection: 'Upgrade', upgrade: 'websocket' }), 426);
  // A handshake at the exact path with a key uWS refuses is told what is wrong with it, not its path.
  const badKey = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const request = httpRequest(`${rt.url}/devices/${ORG}/gate-1`, { headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-key': 'x', 'sec-websocket-version': '13' } });
    request.once('response', (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.once('upgrade', () => reject(new Error('upgraded')));
    request.once('error', reject);
    request.end();
  });
  assert.equal(badKey.status, 400, badKey.body);
  assert.match(badKey.body, /"invalid_handshake".*Sec-WebSocket-Key/);
  // A HEAD with a whole handshake at the exact path is no upgrade: 426, as a plain HEAD (it was told to fix its path).
  assert.equal(await refusedStatus(`${rt.url}/devices/${ORG}/gate-1`, 'HEAD', { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13' }), 426);
  // The token may ride as a subprotocol entry beside sluice-device.
  const device = await connectDevice(rt.url, ORG, 'gate-1', token, { protocols: ['sluice-device', token] });
  assert.equal(device.socket.protocol, 'sluice-device');
  device.close();
  await device.closed;
  // An empty ?token= is no token: the one beside the subprotocol counts.
  const emptyQuery = await connectDevice(rt.url, ORG, 'gate-1', token, { protocols: ['sluice-device', token], extraQuery: 'token=' });
  emptyQuery.close();
  await emptyQuery.closed;
  // Path segments are percent-decoded as REST paths are: an escaping client reaches the same device; a malformed escape says so.
  const escaped = await connectDevice(rt.url, ORG.replace('-', '%2D'), 'gate%2D1', token);
  escaped.close();
  await escaped.closed;
  await assert.rejects(connectDevice(rt.url, ORG, 'gate%E0%A41', token), refusedWith('malformed_path'));
  // A name past any key's length is unknown like any other (it had been a 500 from the store's key encoding).
  await assert.rejects(connectDevice(rt.url, ORG, 'g'.repeat(5000), token), { status: 401 });
  await assert.rejects(connectDevice(rt.url, 'o'.repeat(5000), 'gate-1', token), { status: 401 });
});

test('a connection is sent as device.connected, each message as one event (acked when durable), its end as device.disconnected', async () => {
  const token = await register('thermo-1');
  const device = await connectDevice(rt.url, ORG, 'thermo-1', token);
  const ready = device.frames[0]!;
  assert.equal(ready.type, 'ready');
  const [connected] = await deviceEvents('thermo-1', 'device.connected');
  assert.equal(connected!.id, ready.event_id, 'ready names the stored device.connected');
  assert.equal(connected!.payload.connection_id, ready.connection_id);
  const state = await call(rt.url, 'GET', `${devicesPath}/thermo-1`, { token: key });
  assert.equal(state.body.device.state, 'connected');
  assert.equal(state.body.device.connection_id, ready.connection_id);

  // Sent as text: a number past 2^53 must reach the workflow as written.
  device.send('{"id":"r-1","type":"reading.taken","payload":{"celsius":21.5,"serial":12345678901234567890}}');
  const ack = await device.answerTo('r-1');
  assert.deepEqual({ type: ack.type, duplicate: ack.duplicate }, { type: 'ack', duplicate: false });
  const [reading] = await deviceEvents('thermo-1', 'reading.taken');
  assert.equal(reading!.id, ack.event_id);
  assert.equal(reading!.provider_event_id, 'r-1');
  const posted = await eventually('the run to post the reading', () => receiver.received.filter((r) => r.path === '/reading'), (r) => r.length === 1);
  assert.match(posted[0]!.body, /"serial":12345678901234567890/);
  assert.match(posted[0]!.body, /"source":"@device:thermo-1"/, 'the step sees which device sent it');

  // The device sends it again (it missed the ack): recognised, answered with the original.
  device.send({ id: 'r-1', type: 'reading.taken', payload: { celsius: 99 } });
  await device.waitFor(() => device.frames.filter((f) => f.id === 'r-1').length === 2, 'the second answer');
  const again = device.frames.filter((f) => f.id === 'r-1')[1]!;
  assert.deepEqual({ type: again.type, duplicate: again.duplicate, event_id: again.event_id }, { type: 'ack', duplicate: true, event_id: ack.event_id });
  assert.equal((await deviceEvents('thermo-1', 'reading.taken')).length, 1, 'stored once');
  const metrics = (await call(rt.url, 'GET', '/metrics')).text;
  assert.match(metrics, /^sluice_device_sockets_open 1$/m);
  assert.match(metrics, /^sluice_ingest_total\{outcome="accepted_device"\} 1$/m, 'the duplicate is not counted');

  device.close(1000);
  assert.equal((await device.closed).code, 1000);
  const [ended] = await eventually('device.disconnected', () => deviceEvents('thermo-1', 'device.disconnected'), (e) => e.length === 1);
  assert.equal(ended!.payload.reason, 'client_closed');
  assert.equal(ended!.payload.close_code, 1000);
  assert.equal(ended!.payload.connection_id, ready.connection_id);
  const after = await call(rt.url, 'GET', `${devicesPath}/thermo-1`, { token: key });
  assert.deepEqual([after.body.device.state, after.body.device.last_disconnect_reason], ['disconnected', 'client_closed']);
});

test("a device's connection events cannot be business-replayed (a replay would claim the device went again); its messages can", async () => {
  const replay = (eventId: string) => call(rt.url, 'POST', `/organizations/${ORG}/events/${eventId}/replay`, { token: key, json: { side_effects: 'skip' } });
  for (const type of ['device.connected', 'device.disconnected']) {
    const [event] = await deviceEvents('thermo-1', type);
    const refused = await replay(event!.id);
    assert.deepEqual([refused.status, refused.body.error?.code], [400, 'reserved_event_type'], refused.text);
  }
  const [reading] = await deviceEvents('thermo-1', 'reading.taken');
  assert.equal((await replay(reading!.id)).status, 202);
  const replayed = await call(rt.url, 'GET', `/organizations/${ORG}/events?source=%40replay&limit=500`, { token: key });
  assert.deepEqual(replayed.body.events.map((e: { type: string }) => e.type), ['reading.taken'], 'the message was replayed, no connection event');
});

test('bad frames get a nack naming the problem, and the socket stays open', async () => {
  const token = await register('thermo-2');
  const device = await connectDevice(rt.url, ORG, 'thermo-2', token);
  const cases: Array<[string | Buffer, boolean, string | null, string, string | undefined]> = [
    ['{"id":"b-1","type":"reading.taken",', false, null, 'malformed_json', undefined],
    ['{"id":"b-2","payload":{}}', false, 'b-2', 'invalid_message', 'type'],
    ['{"id":"b-3","type":"has space"}', false, 'b-3', 'invalid_message', 'type'],
    ['{"id":"b-4","type":"reading.taken","payload":[1]}', false, 'b-4', 'invalid_message', 'payload'],
    ['{"id":"b-5","type":"reading.taken","extra":1}', false, 'b-5', 'unknown_field', 'extra'],
    ['{"id":"b-6","type":"a","type":"b"}', false, 'b-6', 'duplicate_json_member', undefined],
    [`{"id":"b-7","type":"reading.taken","payload":{"blob":"${'x'.repeat(70_000)}"}}`, false, 'b-7', 'frame_too_large', undefined],
    [Buffer.from('{"id":"b-8","type":"reading.taken"}'), true, null, 'unsupported_frame', undefined],
    ['{"id":"tab\\there","type":"reading.taken"}', false, null, 'invalid_message', 'id'],
    // Only Sluice says when a connection opened or ended: a device claiming it would fake an outage.
    ['{"id":"b-9","type":"device.disconnected","payload":{"device":"thermo-2","reason":"connection_lost"}}', false, 'b-9', 'reserved_event_type', 'type'],
    ['{"id":"b-10","type":"device.connected"}', false, 'b-10', 'reserved_event_type', 'type'],
    // Stored as values (as API bodies are): a lone surrogate is no Unicode text.
    ['{"id":"b-12","type":"reading.taken","payload":{"x":"\\ud800"}}', false, 'b-12', 'invalid_unicode', 'payload.x'],
    // Nested past the cap: its id is read from its top level, the rest is not parsed.
    [`{"type":"reading.taken","payload":${'['.repeat(200)}${']'.repeat(200)},"id":"b-11"}`, false, 'b-11', 'json_too_deep', undefined],
    [`{"payload":${'{"a":'.repeat(200)}1${'}'.repeat(200)},"type":"reading.taken"}`, false, null, 'json_too_deep', undefined],
  ];
  for (const [frame, binary, id, code, field] of cases) {
    const before = device.frames.length;
    device.send(frame, { binary });
    await device.waitFor(() => device.frames.length > before, `the answer to ${String(frame).slice(0, 40)}`);
    const nack = device.frames[before]!;
    assert.equal(nack.type, 'nack', String(frame).slice(0, 60));
    assert.equal(nack.id, id, String(frame).slice(0, 60));
    assert.equal(nack.error.code, code, String(frame).slice(0, 60));
    assert.equal(nack.error.field, field, String(frame).slice(0, 60));
    assert.equal(nack.retryable, false);
  }
  const before = device.frames.length;
  device.send('[1,2]');
  await device.waitFor(() => device.frames.length > before, 'the answer to an array');
  assert.deepEqual([device.frames[before]!.error.code, device.frames[before]!.error.message], ['invalid_message', 'The frame must be an object.'], 'a frame is not a request body');
  device.send({ id: 'good-1', type: 'reading.taken' });
  assert.equal((await device.answerTo('good-1')).type, 'ack', 'still open and storing');
  assert.deepEqual(await deviceEvents('thermo-2', 'device.disconnected'), [], 'the refused claims stored nothing');
  const [stored] = await deviceEvents('thermo-2', 'reading.taken');
  assert.deepEqual(stored!.payload, {}, 'a message without a payload is stored with {}');
  device.close();
  await device.closed;
});

test('an org\'s sockets may have 2,000 messages refused at once and 1,000 a second: the socket whose refused message finds none left is closed (1008, too_many_refused)', async () => {
  // An org of its own: the budget is the org's, and the clock stands still here (no refill).
  const org = 'acct-refusals';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const token = await register('flooder', {}, org, orgKey);
  const flooder = await connectDevice(rt.url, org, 'flooder', token);
  await flooder.sendAtOnce(Array.from({ length: REFUSALS_PER_SECOND * 2 + 1 }, () => '{'));
  assert.deepEqual(await flooder.closed, { code: 1008, reason: TOO_MANY_REFUSED });
  assert.equal(flooder.frames.filter((frame) => frame.type === 'nack').length, REFUSALS_PER_SECOND * 2, 'each refused message within the budget was answered');
  await eventually('the ending stored', async () => (await call(rt.url, 'GET', `/organizations/${org}/devices/flooder`, { token: orgKey })).body.device.last_disconnect_reason, (reason) => reason === 'too_many_refused');
  // A second later the budget holds a second's refusals again: a malformed frame gets its nack.
  clock.advance(1000);
  const again = await connectDevice(rt.url, org, 'flooder', token);
  again.send('{');
  await again.waitFor(() => again.frames.some((frame) => frame.type === 'nack'), 'the nack');
  again.close();
  await again.closed;
});

const TOO_MANY_REFUSED = `more than ${REFUSALS_PER_SECOND} refused messages a second (a frame counts once per ${REFUSAL_MS} ms its reading took); fix what the nacks say`;

test('a refused frame counts once for each REFUSAL_MS its reading took: frames that take 5 ms each to read spend the 2,000 after 20', { timeout: 30_000 }, async () => {
  // A runtime of its own, whose reading clock moves 5 ms each time it is read: every refused frame took 5 ms.
  let readingMs = 0;
  const slow = await startRuntime({ clock, deviceReadingClock: () => (readingMs += 5) });
  try {
    const org = 'acct-slow-refusals';
    const orgKey = await createOrg(slow.url, ADMIN_TOKEN, org);
    const token = await registerDevice(slow.url, org, orgKey, 'slow-flooder', {});
    const flooder = await connectDevice(slow.url, org, 'slow-flooder', token);
    await flooder.sendAtOnce(Array.from({ length: 50 }, () => '{'));
    assert.deepEqual(await flooder.closed, { code: 1008, reason: TOO_MANY_REFUSED });
    assert.equal(5 / REFUSAL_MS, 100);
    assert.equal(flooder.frames.filter((frame) => frame.type === 'nack').length, 20, '100 refusals each: 20 fit the burst');
  } finally {
    await slow.close();
  }
});

/** The event among `events` about the client's connection (events written in one ms sort by id, not by time). */
const endingOf = <E extends { payload: Record<string, unknown> }>(events: E[], client: DeviceClient): E | undefined =>
  events.find((event) => event.payload.connection_id === client.frames[0]!.connection_id);

test('a newer connection replaces the open one (4409); rotation (4401) and deletion (4404) close it; each ending is sent once', async () => {
  const token = await register('pos-1');
  const first = await connectDevice(rt.url, ORG, 'pos-1', token);
  const second = await connectDevice(rt.url, ORG, 'pos-1', token);
  assert.equal((await first.closed).code, 4409);
  const [replaced] = await eventually('the first connection ended', () => deviceEvents('pos-1', 'device.disconnected'), (e) => e.length === 1);
  assert.equal(replaced!.payload.reason, 'replaced');
  assert.equal(endingOf([replaced!], first), replaced, 'it is the first connection that ended');
  assert.equal((await deviceEvents('pos-1', 'device.connected')).length, 2);

  const rotated = await call(rt.url, 'POST', `${devicesPath}/pos-1/token`, { token: key });
  assert.equal(rotated.status, 200, rotated.text);
  assert.notEqual(rotated.body.token, token);
  // The answer shows the device as the rotation left it: the connection it closed has ended.
  assert.deepEqual([rotated.body.device.state, rotated.body.device.last_disconnect_reason], ['disconnected', 'token_rotated'], rotated.text);
  assert.equal((await second.closed).code, 4401);
  const endings = await eventually('the second connection ended', () => deviceEvents('pos-1', 'device.disconnected'), (e) => e.length === 2);
  assert.equal(endingOf(endings, second)?.payload.reason, 'token_rotated');
  await assert.rejects(connectDevice(rt.url, ORG, 'pos-1', token), { status: 401 }, 'the old token no longer opens it');

  const third = await connectDevice(rt.url, ORG, 'pos-1', rotated.body.token);
  third.send({ id: 'sale-1', type: 'reading.taken' });
  await third.answerTo('sale-1');
  assert.equal((await call(rt.url, 'DELETE', `${devicesPath}/pos-1`, { token: key })).status, 204);
  assert.equal((await third.closed).code, 4404);
  const all = await eventually('the third connection ended', () => deviceEvents('pos-1', 'device.disconnected'), (e) => e.length === 3);
  assert.equal(endingOf(all, third)?.payload.reason, 'device_deleted');

  // Made again under its name, it starts afresh: the same message id is a new message.
  const renewed = await connectDevice(rt.url, ORG, 'pos-1', await register('pos-1'));
  renewed.send({ id: 'sale-1', type: 'reading.taken' });
  assert.equal((await renewed.answerTo('sale-1')).duplicate, false);
  renewed.close();
  await renewed.closed;
  // Settled once the device says its last connection ended: then every ending is written.
  await eventually('the last ending', async () => (await call(rt.url, 'GET', `${devicesPath}/pos-1`, { token: key })).body.device.last_disconnect_reason, (reason) => reason === 'client_closed');
  const written = await deviceEvents('pos-1', 'device.disconnected');
  const byConnection = (client: DeviceClient): unknown[] => written.filter((e) => e.payload.connection_id === client.frames[0]!.connection_id).map((e) => [e.payload.reason, e.payload.close_code]);
  assert.deepEqual(byConnection(first), [['replaced', 4409]]);
  assert.deepEqual(byConnection(second), [['token_rotated', 4401]]);
  assert.deepEqual(byConnection(third), [['device_deleted', 4404]]);
  assert.deepEqual(byConnection(renewed), [['client_closed', 1000]]);
  assert.equal(written.length, 4, 'one ending per connection, no other');
});

test('concurrent token rotations each answer the device as their own token left it (its token_prefix starts the token)', async () => {
  const created = await call(rt.url, 'POST', devicesPath, { token: key, json: { name: 'twice-rotated' } });
  assert.equal(created.status, 201, created.text);
  for (let round = 0; round < 10; round += 1) {
    const answers = await Promise.all([1, 2].map(() => call(rt.url, 'POST', `${devicesPath}/twice-rotated/token`, { token: key })));
    for (const answer of answers) {
      assert.equal(answer.status, 200, answer.text);
      assert.ok(answer.body.token.startsWith(answer.body.device.token_prefix), `round ${round}: ${answer.body.device.token_prefix} is another rotation's`);
    }
  }
});

test('a sandbox device closes with 4402 when its org moves to a plan without a sandbox', async () => {
  const org = 'acct-devices-plan';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const token = await register('lab', { environment: 'sandbox' }, org, orgKey);
  const device = await connectDevice(rt.url, org, 'lab', token);
  const downgraded = await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } });
  assert.equal(downgraded.status, 200, downgraded.text);
  assert.equal((await device.closed).code, 4402);
  await assert.rejects(connectDevice(rt.url, org, 'lab', token), { status: 402 });
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'pro' } })).status, 200);
  const endings = await eventually('its ending', async () => (await call(rt.url, 'GET', `/organizations/${org}/events?type=device.disconnected&environment=sandbox`, { token: orgKey })).body.events as Array<{ payload: Record<string, unknown> }>, (list) => list.length === 1);
  assert.deepEqual([endings[0]!.payload.reason, endings[0]!.payload.close_code], ['sandbox_disabled', 4402]);
});

test('a sandbox device\'s message that comes after its org lost the sandbox, before its socket is closed, is refused (402) and not stored', async () => {
  const org = 'acct-devices-plan-window';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const token = await register('lab', { environment: 'sandbox' }, org, orgKey);
  const device = await connectDevice(rt.url, org, 'lab', token);
  device.send({ id: 'm-before', type: 'reading.taken' });
  assert.equal((await device.answerTo('m-before')).type, 'ack');
  // The plan changed in the store, its sockets not dropped yet (that change waits behind the device's connection changes).
  const orgs = rt.runtime.context.orgs;
  await orgs.update(org, (stored) => ({ ...stored, plan: 'starter' }));
  device.send({ id: 'm-after', type: 'reading.taken' });
  const refused = await device.answerTo('m-after');
  assert.deepEqual([refused.type, refused.error.code, refused.retryable], ['nack', 'sandbox_disabled', false]);
  await orgs.update(org, (stored) => ({ ...stored, plan: 'pro' }));
  const stored = (await call(rt.url, 'GET', `/organizations/${org}/events?type=reading.taken&environment=sandbox`, { token: orgKey })).body.events as Array<{ provider_event_id: string }>;
  assert.deepEqual(stored.map((e) => e.provider_event_id), ['m-before']);
  device.close();
  await device.closed;
});

test('a sandbox reset ends the open sandbox connections (4410) without a device.disconnected; production devices stay connected', async () => {
  const org = 'acct-devices-reset';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const labToken = await register('lab', { environment: 'sandbox' }, org, orgKey);
  const plantToken = await register('plant', {}, org, orgKey);
  const lab = await connectDevice(rt.url, org, 'lab', labToken);
  const plant = await connectDevice(rt.url, org, 'plant', plantToken);
  lab.send({ id: 'm-1', type: 'reading.taken', payload: { celsius: 20 } });
  assert.equal((await lab.answerTo('m-1')).type, 'ack');
  const sandboxEvents = async (type: string): Promise<Array<{ id: string; payload: Record<string, unknown> }>> =>
    (await call(rt.url, 'GET', `/organizations/${org}/events?type=${type}&environment=sandbox`, { token: orgKey })).body.events;

  const reset = await call(rt.url, 'POST', `/organizations/${org}/sandbox/reset`, { token: orgKey });
  assert.equal(reset.status, 200, reset.text);
  assert.equal((await lab.closed).code, 4410);
  const view = await call(rt.url, 'GET', `/organizations/${org}/devices/lab?environment=sandbox`, { token: orgKey });
  assert.deepEqual([view.body.device.state, view.body.device.last_disconnect_reason], ['disconnected', 'sandbox_reset']);
  plant.send({ id: 'p-1', type: 'reading.taken', payload: { celsius: 30 } });
  assert.equal((await plant.answerTo('p-1')).type, 'ack', 'the production device was not touched');
  const plantView = await call(rt.url, 'GET', `/organizations/${org}/devices/plant`, { token: orgKey });
  assert.equal(plantView.body.device.state, 'connected');

  // Its socket's close wrote nothing: the reset left no opening for an ending to follow.
  const again = await connectDevice(rt.url, org, 'lab', labToken);
  again.send({ id: 'm-1', type: 'reading.taken', payload: { celsius: 21 } });
  const resent = await again.answerTo('m-1');
  assert.deepEqual([resent.type, resent.duplicate], ['ack', false], 'the reset forgot the message ids of sandbox devices');
  again.close(1000);
  await again.closed;
  const endings = await eventually('the new connection ending', () => sandboxEvents('device.disconnected'), (list) => list.length === 1);
  assert.deepEqual([endings[0]!.payload.connection_id, endings[0]!.payload.reason], [again.frames[0]!.connection_id, 'client_closed']);
  const openings = await sandboxEvents('device.connected');
  assert.deepEqual(openings.map((e) => e.payload.connection_id), [again.frames[0]!.connection_id], 'only the connection made after the reset');
  plant.close(1000);
  await plant.closed;
});

test('a socket offering subprotocols without sluice-device is refused, so the token is never echoed back', async () => {
  const token = await register('proto-1');
  await assert.rejects(connectDevice(rt.url, ORG, 'proto-1', token, { protocols: [token] }), (error: { status?: number; body?: string }) => error.status === 400 && /invalid_subprotocol/.test(error.body ?? ''));
});

// On the memory ledger a message is stored within the frame's own callback, so none is ever in flight.
const storesInstantly = process.env['SLUICE_TEST_LEDGER'] === 'memory';

test('past MAX_MESSAGES_IN_FLIGHT unacked messages, a message gets a retryable too_many_in_flight nack; sent again it is stored', { skip: storesInstantly && 'runs on LMDB only' }, async () => {
  const device = await connectDevice(rt.url, ORG, 'burst', await register('burst'));
  // One write of many frames: uWS reads them in one go, before any of their flushes completes.
  const frames = Array.from({ length: 3 * MAX_MESSAGES_IN_FLIGHT }, (_, i) => JSON.stringify({ id: `b-${i}`, type: 'burst.sample' }));
  await device.sendAtOnce(frames);
  await device.waitFor(() => device.frames.filter((f) => f.type !== 'ready').length === frames.length, 'an answer to every frame');
  const nacked = device.frames.filter((f) => f.type === 'nack');
  assert.ok(nacked.length > 0, 'the burst passed the cap');
  assert.ok(nacked.every((f) => f.error.code === 'too_many_in_flight' && f.retryable === true));
  assert.ok(device.frames.filter((f) => f.type === 'ack').length >= MAX_MESSAGES_IN_FLIGHT);
  for (const nack of nacked) {
    device.send({ id: nack.id, type: 'burst.sample' });
    await device.waitFor(() => device.frames.filter((f) => f.id === nack.id).length === 2, `the answer to ${nack.id} sent again`);
  }
  assert.equal(new Set(device.frames.filter((f) => f.type === 'ack').map((f) => f.id)).size, frames.length, 'every message acked once sent again one by one');
  device.close();
  await device.closed;
});

test('back-pressure nacks (too_many_in_flight) of well-formed messages spend none of the org\'s refusal budget: the socket stays open', { skip: storesInstantly && 'runs on LMDB only' }, async () => {
  const org = 'acct-backpressure';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const device = await connectDevice(rt.url, org, 'eager', await register('eager', {}, org, orgKey));
  // More than the budget's burst of messages at once, past the in-flight cap: most are nacked.
  const frames = Array.from({ length: REFUSALS_PER_SECOND * 3 }, (_, i) => JSON.stringify({ id: `e-${i}`, type: 'burst.sample' }));
  await device.sendAtOnce(frames);
  await device.waitFor(() => device.frames.filter((f) => f.type !== 'ready').length === frames.length, 'an answer to every frame', 20_000);
  const nacked = device.frames.filter((f) => f.type === 'nack');
  assert.ok(nacked.length > REFUSALS_PER_SECOND * 2, `past the burst of refusals: ${nacked.length}`);
  assert.ok(nacked.every((f) => f.error.code === 'too_many_in_flight'));
  device.send({ id: 'after', type: 'burst.sample' });
  assert.equal((await device.answerTo('after')).type, 'ack', 'still open and storing');
  device.close();
  await device.closed;
});

test('back-pressure nacks of frames whose id is not their first member (a parse each) count as refusals: a flood of them past the cap is closed (1008)', { skip: storesInstantly && 'runs on LMDB only', timeout: 30_000 }, async () => {
  const org = 'acct-backpressure-parsed';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const device = await connectDevice(rt.url, org, 'late-id', await register('late-id', {}, org, orgKey));
  // The id last: each busy answer has to parse the frame to name it.
  const frames = Array.from({ length: REFUSALS_PER_SECOND * 3 }, (_, i) => JSON.stringify({ type: 'burst.sample', id: `l-${i}` }));
  await device.sendAtOnce(frames);
  assert.deepEqual(await device.closed, { code: 1008, reason: TOO_MANY_REFUSED });
  const nacked = device.frames.filter((f) => f.type === 'nack');
  assert.ok(nacked.length > 0 && nacked.every((f) => f.error.code === 'too_many_in_flight' && /^l-\d+$/.test(f.id)), 'each nack before the close named its message');
});

test('a frame whose first member is its id has it read from its first bytes; any other opening, an escape or a binary frame has it read by a parse', () => {
  const text = (value: string) => Buffer.from(value, 'utf8');
  assert.equal(leadingFrameId(text('{"id":"m-1","type":"t","payload":{"id":"inner"}}'), false), 'm-1');
  assert.equal(leadingFrameId(text(' {\n "id" : "m-2" }'), false), 'm-2');
  assert.equal(leadingFrameId(text('{"type":"t","id":"m-3"}'), false), undefined);
  assert.equal(leadingFrameId(text('{"id":"m\\"4"}'), false), undefined, 'an escape: parsed instead');
  assert.equal(leadingFrameId(text('{"id":"has space"}'), false), null, 'no message may have that id');
  assert.equal(leadingFrameId(text('{"id":"m-5"}'), true), null);
});

test("a device's declared schemas: a message failing its type's schema is nacked naming the field; a PATCH applies to the open socket's next message", async () => {
  const bad = await call(rt.url, 'POST', devicesPath, { token: key, json: { name: 'scale-0', event_types: { 'weight.measured': { type: 'object', properties: { grams: { type: 'nonsense' } } } } } });
  assert.deepEqual([bad.status, bad.body.error.code, bad.body.error.field], [400, 'invalid_event_schema', 'event_types.weight.measured']);
  const schema = { type: 'object', required: ['grams'], properties: { grams: { type: 'number', minimum: 0 } } };
  const token = await register('scale-1', { event_types: { 'weight.measured': schema } });
  const device = await connectDevice(rt.url, ORG, 'scale-1', token);
  device.send({ id: 'w-1', type: 'weight.measured', payload: { grams: -5 } });
  const refused = await device.answerTo('w-1');
  assert.deepEqual([refused.type, refused.error.code, refused.error.field, refused.retryable], ['nack', 'schema_validation_failed', 'payload.grams', false]);
  device.send({ id: 'w-2', type: 'weight.measured', payload: { grams: 120 } });
  assert.equal((await device.answerTo('w-2')).type, 'ack');
  device.send({ id: 'w-3', type: 'door.opened', payload: { anything: true } });
  assert.equal((await device.answerTo('w-3')).type, 'ack', 'a type without a schema is not checked');

  const patched = await call(rt.url, 'PATCH', `${devicesPath}/scale-1`, { token: key, json: { event_types: { 'weight.measured': { ...schema, properties: { grams: { type: 'number', maximum: 100 } } } } } });
  assert.equal(patched.status, 200, patched.text);
  assert.equal(patched.body.device.event_types['weight.measured'].properties.grams.maximum, 100);
  device.send({ id: 'w-4', type: 'weight.measured', payload: { grams: 120 } });
  assert.deepEqual([(await device.answerTo('w-4')).type, (await device.answerTo('w-4')).error?.field], ['nack', 'payload.grams'], 'the new schema, on the socket opened before it');
  // A message stored before the PATCH, sent again (its ack lost), is acked as a duplicate, not nacked as never stored.
  device.send({ id: 'w-2', type: 'weight.measured', payload: { grams: 120 } });
  await device.waitFor(() => device.frames.filter((f) => f.id === 'w-2').length === 2, 'the answer to the copy');
  const copy = device.frames.filter((f) => f.id === 'w-2')[1]!;
  assert.deepEqual([copy.type, copy.duplicate], ['ack', true]);
  const badPatch = await call(rt.url, 'PATCH', `${devicesPath}/scale-1`, { token: key, json: { event_types: { 'weight.measured': { pattern: '(?=x)', type: 'string' } } } });
  assert.deepEqual([badPatch.status, badPatch.body.error.code], [400, 'invalid_event_schema']);
  assert.deepEqual((await deviceEvents('scale-1', 'weight.measured')).map((e) => e.provider_event_id), ['w-2'], 'only the message that passed is stored');
  device.close();
  await device.closed;
});

test('a PATCH whose device was deleted and made again while its schemas compiled is 404: the new device keeps its own (no) schemas', async () => {
  await register('remade-thermo', { environment: 'sandbox' });
  const eventTypes = { 't.1': { type: 'object', properties: { p: { type: 'string', minLength: 1, maxLength: 64 } } } };
  // The compile is held until the delete and the new device have landed.
  const held = gateNextCall(rt.runtime.context.schemas.writes, 'compile');
  const patching = call(rt.url, 'PATCH', `${devicesPath}/remade-thermo?environment=sandbox`, { token: key, json: { event_types: eventTypes } });
  try {
    await held.reachedBefore(patching, 'the PATCH');
    assert.equal((await call(rt.url, 'DELETE', `${devicesPath}/remade-thermo?environment=sandbox`, { token: key })).status, 204);
    await register('remade-thermo');
  } finally {
    held.done();
  }
  const patched = await patching;
  assert.equal(patched.status, 404, patched.text);
  const remade = await call(rt.url, 'GET', `${devicesPath}/remade-thermo`, { token: key });
  assert.deepEqual([remade.body.device.environment, remade.body.device.event_types], ['production', {}]);
});

/** The status of a request that must not upgrade (it fails if it does). */
function refusedStatus(url: string, method: string, headers: Record<string, string>): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const request = httpRequest(url, { method, headers });
    request.once('response', (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.once('upgrade', () => reject(new Error('upgraded')));
    request.once('error', reject);
    request.end();
  });
}
