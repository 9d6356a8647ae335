// A key or device token that a WebSocket cannot carry (a line break in it; for a device token, a
// file's trailing newline too) against a real runtime: `done` rejects with the client's own error
// naming the problem (it was ws's bare SyntaxError), a device's sends reject instead of waiting until
// close(), and the same credential trimmed works; an API key's white space at its ends is dropped,
// as REST calls drop it. A key that is no subprotocol token but visible ASCII rides in the URL.

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

test('an API key with a line break inside ends watchRuns with LiveClosedError (code 0) saying so; one with a trailing newline joins, as REST calls send it trimmed', async () => {
  const broken = `${key.slice(0, 10)}\n${key.slice(10)}`;
  const live = watchRuns({ url: rt.url, apiKey: broken, org: ORG, sleep: noWait, onUpdate: () => undefined });
  const ended = await live.done.then(() => undefined, (error: unknown) => error);
  assert.ok(ended instanceof LiveClosedError, String(ended));
  assert.equal(ended.code, 0);
  assert.match(ended.message, /^The API key holds U\+000A at position 10: it is sent/);
  assert.ok(!ended.message.includes(key.slice(10)), 'the key itself is not in the message');

  const fromFile = watchRuns({ url: rt.url, apiKey: `${key}\n`, org: ORG, sleep: noWait, onUpdate: () => undefined });
  await eventually('joined', () => fromFile.position, (position) => position !== undefined);
  fromFile.close();
  // Unset options are said as such, before anything is sent.
  assert.throws(() => watchRuns({ url: rt.url, apiKey: undefined as unknown as string, org: ORG, onUpdate: () => undefined }), /^TypeError: The API key is missing \(apiKey\)\.$/);
  assert.throws(() => watchRuns({ url: rt.url, apiKey: key, org: undefined as unknown as string, onUpdate: () => undefined }), /The organization id is missing \(got undefined\)/);
  assert.throws(() => watchRuns({ url: rt.url, apiKey: key, org: ORG, runId: '', onUpdate: () => undefined }), /The run id is empty: leave runId out to watch every run/);
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

test('a device without a token or a name is refused before anything is sent', () => {
  assert.throws(() => connectDevice({ url: rt.url, org: ORG, device: 'd1', token: undefined as unknown as string }), /^TypeError: The device token is missing \(token\)\.$/);
  assert.throws(() => connectDevice({ url: rt.url, org: ORG, device: undefined as unknown as string, token }), /The device name is missing \(got undefined\)/);
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
