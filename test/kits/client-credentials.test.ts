// A key or device token that a WebSocket cannot carry (read from a file with its trailing
// newline) against a real runtime: `done` rejects with the client's own error naming the problem
// (it was ws's bare SyntaxError), a device's sends reject instead of waiting until close(), and
// the same credential trimmed works. A key that is no subprotocol token but visible ASCII rides in the URL.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connectDevice, DeviceError, LiveClosedError, watchRuns, type Sleep } from '../../kits/client/index.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-client-credentials';
const noWait: Sleep = async () => undefined;
let rt: TestRuntime;
let key: string;
let token: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'd1' } });
  assert.equal(created.status, 201, created.text);
  token = created.body.token;
});
after(() => rt.close());

test('an API key with a trailing newline ends watchRuns with LiveClosedError (code 0) saying so; trimmed, it joins', async () => {
  const live = watchRuns({ url: rt.url, apiKey: `${key}\n`, org: ORG, sleep: noWait, onUpdate: () => undefined });
  const ended = await live.done.then(() => undefined, (error: unknown) => error);
  assert.ok(ended instanceof LiveClosedError, String(ended));
  assert.equal(ended.code, 0);
  assert.match(ended.message, /^The API key holds U\+000A at position \d+ \(white space around it, such as the newline ending a file: trim it\)/);
  assert.ok(!ended.message.includes(key), 'the key itself is not in the message');

  const trimmed = watchRuns({ url: rt.url, apiKey: `${key}\n`.trim(), org: ORG, sleep: noWait, onUpdate: () => undefined });
  await eventually('joined', () => trimmed.position, (position) => position !== undefined);
  trimmed.close();
});

test('a device token with a trailing newline: done rejects with DeviceError invalid_token, and every send rejects at once', async () => {
  const device = connectDevice({ url: rt.url, org: ORG, device: 'd1', token: `${token}\n`, sleep: noWait });
  await assert.rejects(device.done, (error: unknown) => error instanceof DeviceError && error.code === 'invalid_token' && error.field === 'token' && /U\+000A/.test(error.message));
  await assert.rejects(device.send({ type: 'reading.taken' }), (error: unknown) => error instanceof DeviceError && error.code === 'invalid_token');
  await assert.rejects(device.send({ type: 'reading.taken' }), DeviceError, 'a later send too');
  assert.equal(device.pending, 0);
  device.close();

  const trimmed = connectDevice({ url: rt.url, org: ORG, device: 'd1', token: `${token}\n`.trim(), sleep: noWait });
  assert.equal((await trimmed.send({ type: 'reading.taken' })).duplicate, false);
  trimmed.close();
});

test('a url the client cannot use ends a device with invalid_options, its sends rejected', async () => {
  const device = connectDevice({ url: 'ftp://127.0.0.1:1', org: ORG, device: 'd1', token, sleep: noWait });
  await assert.rejects(device.done, (error: unknown) => error instanceof DeviceError && error.code === 'invalid_options' && /ftp:/.test(error.message));
  await assert.rejects(device.send({ type: 'reading.taken' }), (error: unknown) => error instanceof DeviceError && error.code === 'invalid_options');
});

test('a key that cannot be a subprotocol entry (an admin token of base64, with "/" and "=") rides in the URL and joins', async () => {
  const adminToken = 'Zm9vYmFy/+k9QmF6cXV4MTIzNDU2Nzg5MA==';
  const admin = await startRuntime({ args: ['--admin-token', adminToken] });
  try {
    await createOrg(admin.url, adminToken, ORG);
    const live = watchRuns({ url: admin.url, apiKey: adminToken, org: ORG, sleep: noWait, onUpdate: () => undefined });
    await eventually('joined', () => live.position, (position) => position !== undefined);
    live.close();
    await live.done;
  } finally {
    await admin.close();
  }
});
