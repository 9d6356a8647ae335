// A device holds at most MAX_SOCKETS_PER_DEVICE sockets at once (from their opening until their
// ending is written), and an org's devices at most half of the process's WebSockets: one token
// opening sockets faster than their connects are written cannot take every WebSocket the process
// allows. Past either cap an upgrade is 429 too_many_device_sockets with Retry-After; other
// devices and orgs still connect; a device that holds its one open socket may replace it at its org's share.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import WebSocket from 'ws';
import { DeviceStore } from '../../runtime/triggers/device-store.ts';
import { MAX_SOCKETS_PER_DEVICE } from '../../runtime/triggers/device-socket-table.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { upgradeAnswer } from '../helpers/upgrade-answer.ts';

/** While set, DeviceStore.connect waits for it: sockets opened meanwhile stay unrecorded, as behind a slow disk. */
let held: Promise<void> | undefined;
const store = DeviceStore.prototype as unknown as { connect: (...args: unknown[]) => Promise<unknown> };
const connect = store.connect;
store.connect = async function (this: unknown, ...args: unknown[]) {
  await held;
  return connect.apply(this, args);
};

async function register(rt: TestRuntime, org: string, token: string, name: string): Promise<string> {
  const created = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token, json: { name } });
  assert.equal(created.status, 201, created.text);
  return created.body.token;
}

function openRaw(rt: TestRuntime, org: string, name: string, token: string): Promise<WebSocket> {
  const socket = new WebSocket(`${rt.url.replace('http', 'ws')}/devices/${org}/${name}?token=${token}`);
  return new Promise((resolve, reject) => {
    socket.on('error', reject);
    socket.on('open', () => resolve(socket));
  });
}

test(`a device holds at most ${MAX_SOCKETS_PER_DEVICE} sockets while their connects wait; one more is 429, another device is admitted`, async () => {
  const rt = await startRuntime();
  let release = (): void => undefined;
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-flood');
    const token = await register(rt, 'acct-flood', key, 'flooder');
    const quietToken = await register(rt, 'acct-flood', key, 'quiet');
    held = new Promise((resolve) => (release = resolve));
    const sockets: WebSocket[] = [];
    for (let i = 0; i < MAX_SOCKETS_PER_DEVICE; i++) sockets.push(await openRaw(rt, 'acct-flood', 'flooder', token));
    const refused = await upgradeAnswer(`${rt.url}/devices/acct-flood/flooder?token=${token}`);
    assert.deepEqual([refused.status, refused.code, refused.retryAfter], [429, 'too_many_device_sockets', '1']);
    assert.match(refused.message, /Device "flooder" has 4 connections opening or ending/);
    held = undefined;
    release();
    const quiet = await connectDevice(rt.url, 'acct-flood', 'quiet', quietToken);
    // The held connects are written in turn; each replaces the one before (4409), so one stays.
    await eventually('one socket of the device left open', () => sockets.filter((socket) => socket.readyState === WebSocket.OPEN).length, (open) => open === 1);
    for (const socket of sockets) socket.close();
    const again = await eventually('the device connects again once its sockets ended', () => connectDevice(rt.url, 'acct-flood', 'flooder', token).catch(() => undefined), (client) => client !== undefined);
    again!.close();
    quiet.close();
  } finally {
    held = undefined;
    release();
    await rt.close();
  }
});

test('an org\'s devices hold at most half of --websockets; one more is 429, another org is admitted', async () => {
  const rt = await startRuntime({ args: ['--websockets', '6', '--live-sockets-per-org', '6'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-many');
    const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-few');
    const tokens: string[] = [];
    for (let i = 0; i < 4; i++) tokens.push(await register(rt, 'acct-many', key, `d${i}`));
    const otherToken = await register(rt, 'acct-few', otherKey, 'd0');
    const open: Awaited<ReturnType<typeof connectDevice>>[] = [];
    for (let i = 0; i < 3; i++) open.push(await connectDevice(rt.url, 'acct-many', `d${i}`, tokens[i]));
    const refused = await upgradeAnswer(`${rt.url}/devices/acct-many/d3?token=${tokens[3]}`);
    assert.deepEqual([refused.status, refused.code, refused.retryAfter], [429, 'too_many_device_sockets', '1']);
    assert.match(refused.message, /devices may hold at most 3 sockets at once/);
    // A device that holds its open socket connects again at the share: the newer one replaces it
    // (4409), so the count comes back (a socket left half-open by a network drop had locked its
    // device out until its idle timeout, ~2 min).
    const replacement = await connectDevice(rt.url, 'acct-many', 'd1', tokens[1]);
    assert.equal((await open[1]!.closed).code, 4409);
    open[1] = replacement;
    await eventually('the replaced socket let go', () => upgradeAnswer(`${rt.url}/devices/acct-many/d3?token=${tokens[3]}`), (answer) => answer.status === 429 && /at most 3 sockets/.test(answer.message));
    // One such replacement of an org at a time: while one waits to be recorded (its older socket
    // still open), another device's is refused, so a reconnect loop cannot hold the org past its share.
    let release = (): void => undefined;
    held = new Promise((resolve) => (release = resolve));
    try {
      const unrecorded = await openRaw(rt, 'acct-many', 'd2', tokens[2]!);
      const second = await upgradeAnswer(`${rt.url}/devices/acct-many/d0?token=${tokens[0]}`);
      // (The org's four sockets are its share of --websockets 6 too, which refuses it first.)
      assert.deepEqual([second.status, second.code], [429, 'too_many_org_websockets']);
      held = undefined;
      release();
      assert.equal((await open[2]!.closed).code, 4409, 'recorded, it replaced the older one');
      unrecorded.close();
      await eventually('the next replacement taken', () => connectDevice(rt.url, 'acct-many', 'd0', tokens[0]).catch(() => undefined), (client) => client !== undefined).then((client) => (open[0] = client!));
    } finally {
      held = undefined;
      release();
    }
    const other = await connectDevice(rt.url, 'acct-few', 'd0', otherToken);
    open[0]!.close();
    const freed = await eventually('a place freed by a closed socket', () => connectDevice(rt.url, 'acct-many', 'd3', tokens[3]).catch(() => undefined), (client) => client !== undefined);
    for (const client of [...open.slice(1), other, freed!]) client.close();
  } finally {
    await rt.close();
  }
});
