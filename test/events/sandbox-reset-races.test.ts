// A sandbox reset reads the org's sandbox source and device names after its first write, then
// ends connections and sweeps by them, while requests go on. A gate after the device names are
// read holds the reset there: a sandbox device socket dropping meanwhile writes no
// `device.disconnected` (its ending waits out the reset, which ends it), and a sandbox source
// deleted and made again in production under its name keeps the dedup claims its deliveries make.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, test } from 'node:test';
import { DeviceStore } from '../../runtime/triggers/device-store.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

let rt: TestRuntime;
let release: () => void = () => undefined;
let held: Promise<void> = Promise.resolve();
const headsInTurns = DeviceStore.prototype.headsInTurns;
beforeEach(async () => {
  const gate = new Promise<void>((resolve) => (release = resolve));
  let reached: () => void = () => undefined;
  held = new Promise<void>((resolve) => (reached = resolve));
  DeviceStore.prototype.headsInTurns = async function* (this: DeviceStore, orgId: string) {
    yield* headsInTurns.call(this, orgId);
    reached();
    await gate;
  };
  rt = await startRuntime();
});
afterEach(async () => {
  DeviceStore.prototype.headsInTurns = headsInTurns;
  release();
  await rt.close();
});

test('a sandbox device socket that drops during a reset writes no device.disconnected: the reset ends its connection', async () => {
  const org = 'acct-reset-drop';
  const receiver = await startReceiver();
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
    const workflow = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'offline', trigger_event: 'device.disconnected', environment: 'sandbox', steps: [{ id: 'page', type: 'webhook', url: `${receiver.url}/offline` }] } });
    assert.equal(workflow.status, 201, workflow.text);
    const made = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token: key, json: { name: 'kiosk', environment: 'sandbox' } });
    const device = await connectDevice(rt.url, org, 'kiosk', made.body.token);
    const resetting = call(rt.url, 'POST', `/organizations/${org}/sandbox/reset`, { token: key });
    await held;
    device.close(1000);
    await device.closed;
    await eventually('the socket closed at the server', () => rt.runtime.devices.openSockets, (open) => open === 0);
    release();
    assert.equal((await resetting).status, 200);
    const view = await eventually('the connection ended', async () => (await call(rt.url, 'GET', `/organizations/${org}/devices/kiosk?environment=sandbox`, { token: key })).body.device, (d) => d.state === 'disconnected');
    assert.equal(view.last_disconnect_reason, 'sandbox_reset');
    const endings = await call(rt.url, 'GET', `/organizations/${org}/events?type=device.disconnected&environment=sandbox`, { token: key });
    assert.deepEqual(endings.body.events, [], 'no device.disconnected was stored');
    assert.deepEqual(receiver.received, [], 'no workflow ran on one');
  } finally {
    await receiver.close();
  }
});

test('a sandbox source deleted during a reset and made again in production keeps the dedup claims of its deliveries', async () => {
  const org = 'acct-reset-name-reuse';
  const key = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const secret = newStandardSecret();
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: key, json: { name: 'billing', environment: 'sandbox', secrets: [secret] } })).status, 201);
  const resetting = call(rt.url, 'POST', `/organizations/${org}/sandbox/reset`, { token: key });
  await held;
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${org}/sources/billing?environment=sandbox`, { token: key })).status, 204);
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: key, json: { name: 'billing', secrets: [secret] } })).status, 201);
  const body = JSON.stringify({ type: 'invoice.paid', amount: 10 });
  const at = Math.floor(Date.now() / 1000);
  const deliver = () => call(rt.url, 'POST', `/hooks/${org}/billing`, { body, headers: signStandard(secret, 'msg_1', at, body) });
  assert.equal((await deliver()).status, 204);
  release();
  assert.equal((await resetting).status, 200);
  const again = await deliver();
  assert.deepEqual([again.status, again.body.error?.code], [409, 'duplicate_event'], again.text);
});
