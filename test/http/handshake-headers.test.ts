// A GET that reaches a WebSocket endpoint's exact path with a handshake key but without asking to
// upgrade (no `Upgrade: websocket`, no `Connection: Upgrade`), or asking for another protocol
// version, is 426 with `Sec-WebSocket-Version: 13`: uWS hands such a GET to the upgrade handler,
// which opened a socket (a device's connection events written and charged) before it checked.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { call, createOrg, registerDevice } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-handshake';
let rt: TestRuntime;
let key: string;
let deviceToken: string;
before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  deviceToken = await registerDevice(rt.url, ORG, key, 'till-1');
});
after(async () => rt.close());

/** Sends a raw GET of `path` with `headers` (and a handshake key); resolves with the head of the answer once it is complete. */
function rawGet(path: string, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const { hostname, port } = new URL(rt.url);
  const lines = [`GET ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(`${lines.join('\r\n')}\r\n\r\n`));
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...headerLines] = text.slice(0, end).split('\r\n');
      const answered = Object.fromEntries(headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      const length = Number(answered['content-length'] ?? 0);
      if (text.length - end - 4 < length) return;
      socket.destroy();
      resolve({ status: Number(statusLine!.split(' ')[1]), headers: answered, body: text.slice(end + 4, end + 4 + length) });
    });
    socket.on('error', reject);
  });
}

const devicePath = () => `/devices/${ORG}/till-1?token=${encodeURIComponent(deviceToken)}`;

test('a device GET with a handshake key but no Upgrade is 426, and opens no connection', async () => {
  const answer = await rawGet(devicePath(), { 'Sec-WebSocket-Version': '13' });
  assert.equal(answer.status, 426, answer.body);
  assert.equal(JSON.parse(answer.body).error.code, 'upgrade_required');
  assert.equal(answer.headers['sec-websocket-version'], '13');
  const device = await call(rt.url, 'GET', `/organizations/${ORG}/devices/till-1`, { token: key });
  assert.deepEqual([device.body.device.state, device.body.device.last_disconnected_at], ['disconnected', null], 'no connection was ever recorded');
  const events = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=device.connected`, { token: key });
  assert.deepEqual(events.body.events, [], 'no device.connected written');
});

test('a handshake for another WebSocket version is 426 naming version 13; one with Connection: keep-alive, Upgrade is a handshake', async () => {
  const older = await rawGet(devicePath(), { Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Version': '8' });
  assert.equal(older.status, 426, older.body);
  assert.deepEqual([JSON.parse(older.body).error.code, older.headers['sec-websocket-version']], ['unsupported_websocket_version', '13']);
  const listed = await rawGet(devicePath(), { Upgrade: 'WebSocket', Connection: 'keep-alive, Upgrade', 'Sec-WebSocket-Version': '13' });
  assert.equal(listed.status, 101, 'a token list and any case are a handshake');
});

test('a live room GET with a handshake key but no Upgrade is 426', async () => {
  const answer = await rawGet(`/organizations/${ORG}/live?token=${encodeURIComponent(key)}`, { 'Sec-WebSocket-Version': '13' });
  assert.equal(answer.status, 426, answer.body);
  assert.equal(JSON.parse(answer.body).error.code, 'upgrade_required');
});
