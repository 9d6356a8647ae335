// Records addressed by name (schedules, sources, devices) deleted and made again under the name
// while a request about the first one is on its way: the request acts on the record it read or
// on nothing (404), never on the new one (another environment, say); and a device made again while
// its delete is still being written starts with no memory of the old device's message ids.
// A gate wrapped around a store method (for devices, the socket layer's, before it queues the
// device's changes) holds one request between its read and its write, the window a slow fsync or
// a queue gives, so the order the test needs happens every time.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SourceStore } from '../../runtime/sources/source-store.ts';
import { DeviceSockets } from '../../runtime/triggers/device-sockets.ts';
import { ScheduleStore } from '../../runtime/triggers/schedule-store.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { gateNextCall, whileCallHeld } from '../helpers/method-gate.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-remade';
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

const path = (kind: string, name = '', query = ''): string => `/organizations/${ORG}/${kind}${name === '' ? '' : `/${name}`}${query}`;

test('a schedule PATCH and DELETE that read the production schedule do not touch the sandbox one made under its name meanwhile', async () => {
  const made = await call(rt.url, 'POST', path('schedules'), { token: key, json: { name: 'daily', cron: '0 9 * * *', event_type: 'prod.tick' } });
  assert.equal(made.status, 201, made.text);
  // Deletes the production schedule and makes one of the name in sandbox.
  const remake = async (): Promise<void> => {
    assert.equal((await call(rt.url, 'DELETE', path('schedules', 'daily'), { token: key })).status, 204);
    const sandbox = await call(rt.url, 'POST', path('schedules'), { token: key, json: { name: 'daily', cron: '*/5 * * * *', event_type: 'sandbox.tick', environment: 'sandbox' } });
    assert.equal(sandbox.status, 201, sandbox.text);
  };

  const held = gateNextCall(ScheduleStore.prototype, 'update');
  const patch = call(rt.url, 'PATCH', path('schedules', 'daily', '?environment=production'), { token: key, json: { enabled: false } });
  await whileCallHeld(held, patch, 'the PATCH', remake);
  assert.equal((await patch).status, 404);
  const sandbox = await call(rt.url, 'GET', path('schedules', 'daily', '?environment=sandbox'), { token: key });
  assert.deepEqual([sandbox.body.schedule.enabled, sandbox.body.schedule.event_type], [true, 'sandbox.tick']);

  // Production again, and a DELETE (a client's retry, say) that read it before it was remade in sandbox.
  assert.equal((await call(rt.url, 'DELETE', path('schedules', 'daily', '?environment=sandbox'), { token: key })).status, 204);
  assert.equal((await call(rt.url, 'POST', path('schedules'), { token: key, json: { name: 'daily', cron: '0 9 * * *', event_type: 'prod.tick' } })).status, 201);
  const heldDelete = gateNextCall(ScheduleStore.prototype, 'delete');
  const deleting = call(rt.url, 'DELETE', path('schedules', 'daily', '?environment=production'), { token: key });
  await whileCallHeld(heldDelete, deleting, 'the DELETE', remake);
  assert.equal((await deleting).status, 404);
  assert.equal((await call(rt.url, 'GET', path('schedules', 'daily', '?environment=sandbox'), { token: key })).status, 200, 'the sandbox schedule is still there');
});

test('a source DELETE that read the production source leaves the sandbox one made under its name meanwhile', async () => {
  const secret = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
  assert.equal((await call(rt.url, 'POST', path('sources'), { token: key, json: { name: 'shop', secrets: [secret] } })).status, 201);
  const held = gateNextCall(SourceStore.prototype, 'delete');
  const deleting = call(rt.url, 'DELETE', path('sources', 'shop', '?environment=production'), { token: key });
  await whileCallHeld(held, deleting, 'the DELETE', async () => {
    assert.equal((await call(rt.url, 'DELETE', path('sources', 'shop'), { token: key })).status, 204);
    assert.equal((await call(rt.url, 'POST', path('sources'), { token: key, json: { name: 'shop', secrets: [secret], environment: 'sandbox' } })).status, 201);
  });
  assert.equal((await deleting).status, 404);
  assert.equal((await call(rt.url, 'GET', path('sources', 'shop', '?environment=sandbox'), { token: key })).status, 200, 'the sandbox source is still there');
});

test('a device token rotation or DELETE that read the production device does not touch the sandbox one made under its name meanwhile', async () => {
  // Deletes the production device and makes one of the name in sandbox; its token prefix.
  const remake = async (): Promise<string> => {
    assert.equal((await call(rt.url, 'DELETE', path('devices', 'till'), { token: key })).status, 204);
    const sandbox = await call(rt.url, 'POST', path('devices'), { token: key, json: { name: 'till', environment: 'sandbox' } });
    assert.equal(sandbox.status, 201, sandbox.text);
    return sandbox.body.device.token_prefix;
  };
  assert.equal((await call(rt.url, 'POST', path('devices'), { token: key, json: { name: 'till' } })).status, 201);
  const heldRotation = gateNextCall(DeviceSockets.prototype, 'rotateToken');
  const rotating = call(rt.url, 'POST', path('devices', 'till/token', '?environment=production'), { token: key });
  let prefix = '';
  await whileCallHeld(heldRotation, rotating, 'the rotation', async () => void (prefix = await remake()));
  assert.equal((await rotating).status, 404);
  const sandbox = await call(rt.url, 'GET', path('devices', 'till', '?environment=sandbox'), { token: key });
  assert.equal(sandbox.body.device.token_prefix, prefix, 'the sandbox device keeps its token');

  assert.equal((await call(rt.url, 'DELETE', path('devices', 'till', '?environment=sandbox'), { token: key })).status, 204);
  assert.equal((await call(rt.url, 'POST', path('devices'), { token: key, json: { name: 'till' } })).status, 201);
  const heldDelete = gateNextCall(DeviceSockets.prototype, 'deleteDevice');
  const deleting = call(rt.url, 'DELETE', path('devices', 'till', '?environment=production'), { token: key });
  await whileCallHeld(heldDelete, deleting, 'the DELETE', remake);
  assert.equal((await deleting).status, 404);
  assert.equal((await call(rt.url, 'GET', path('devices', 'till', '?environment=sandbox'), { token: key })).status, 200, 'the sandbox device is still there');
});

test('a device made again while its delete is still being written has no memory of the old one\'s message ids', async () => {
  const created = await call(rt.url, 'POST', path('devices'), { token: key, json: { name: 'pos' } });
  assert.equal(created.status, 201, created.text);
  const first = await connectDevice(rt.url, ORG, 'pos', created.body.token);
  first.send({ id: 'sale-1', type: 'sale.made', payload: { amount: 100 } });
  assert.equal((await first.answerTo('sale-1')).duplicate, false);
  first.close();
  await first.closed;
  await eventually('the connection ended', () => call(rt.url, 'GET', path('devices', 'pos'), { token: key }), (got) => got.body.device?.state === 'disconnected');

  // Both in one turn: the create reads whether the name is taken before the delete has committed.
  const store = rt.runtime.deviceStore;
  const old = store.require(ORG, 'pos');
  const deleting = store.delete(ORG, 'pos', old.id, () => ({ reason: 'device_deleted', code: 4404 }), Date.now());
  const now = new Date().toISOString();
  await store.create({ ...old, id: 'dev_remade0000000000000000', created_at: now, updated_at: now, last_disconnected_at: null, last_disconnect_reason: null });
  await deleting;

  const again = await connectDevice(rt.url, ORG, 'pos', created.body.token); // the new device has the old token's hash
  again.send({ id: 'sale-1', type: 'sale.made', payload: { amount: 999 } });
  const answer = await again.answerTo('sale-1');
  again.close();
  await again.closed;
  assert.deepEqual([answer.type, answer.duplicate], ['ack', false], JSON.stringify(answer));
  const stored = await call(rt.url, 'GET', path('events', '', '?type=sale.made&limit=10'), { token: key });
  assert.deepEqual(stored.body.events.map((e: { payload: { amount: number } }) => e.payload.amount).sort(), [100, 999]);
});
