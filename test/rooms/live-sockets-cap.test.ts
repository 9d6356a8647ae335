// An org holds at most --live-sockets-per-org live sockets open at once: one more upgrade is a 429
// naming the cap, other orgs are not counted against it, and a closed socket frees its place. The
// process holds at most --websockets live and device sockets together: past it, 503 with Retry-After.
// Each upgrade's answer, taken or refused, is counted in the request histogram.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { connectLive, type LiveClient } from '../helpers/live-client.ts';
import { defaultWebSocketLimit, WEBSOCKETS_FALLBACK } from '../../runtime/http/websocket-budget.ts';
import { defaultOutboundSocketTotal } from '../../runtime/runs/org-socket-share.ts';
import { loadRuntimeConfig } from '../../runtime/config.ts';
import { openFileLimit, RESERVED_FILES } from '../../runtime/open-file-limit.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';
import { upgradeAnswer } from '../helpers/upgrade-answer.ts';

test('past the org\'s cap an upgrade is refused with 429; another org and a freed place are admitted', async () => {
  const rt = await startRuntime({ args: ['--live-sockets-per-org', '2'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-capped-live');
    const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-other-live');
    const first = await connectLive(rt.url, 'acct-capped-live', { token: key });
    const second = await connectLive(rt.url, 'acct-capped-live', { token: key });
    await assert.rejects(connectLive(rt.url, 'acct-capped-live', { token: key }), /upgrade refused: 429/);
    const other = await connectLive(rt.url, 'acct-other-live', { token: otherKey });
    first.close();
    await first.closed;
    const third = await connectOnceFreed(() => connectLive(rt.url, 'acct-capped-live', { token: key }));
    for (const client of [second, other, third]) client.close();
  } finally {
    await rt.close();
  }
});

test('past the process\'s --websockets total, live and device upgrades are refused with 503 and Retry-After; a closed socket frees its place', async () => {
  const rt = await startRuntime({ args: ['--websockets', '3', '--live-sockets-per-org', '10'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-ws-a');
    const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-ws-b');
    const device = await call(rt.url, 'POST', '/organizations/acct-ws-b/devices', { token: otherKey, json: { name: 'sensor-1' } });
    assert.equal(device.status, 201, device.text);
    const spare = await call(rt.url, 'POST', '/organizations/acct-ws-b/devices', { token: otherKey, json: { name: 'sensor-2' } });
    const live: LiveClient[] = [await connectLive(rt.url, 'acct-ws-a', { token: key }), await connectLive(rt.url, 'acct-ws-a', { token: key })];
    const sensor = await connectDevice(rt.url, 'acct-ws-b', 'sensor-1', device.body.token);
    await assert.rejects(connectLive(rt.url, 'acct-ws-b', { token: otherKey }), /upgrade refused: 503/);
    await assert.rejects(connectDevice(rt.url, 'acct-ws-b', 'sensor-2', spare.body.token), (error: { status: number; body: string }) => {
      assert.equal(error.status, 503);
      assert.match(JSON.parse(error.body).error.message, /as many WebSockets open as it may \(3\)/);
      return true;
    });
    const refused = await upgradeAnswer(`${rt.url}/organizations/acct-ws-a/live?token=${key}`);
    assert.deepEqual([refused.status, refused.retryAfter, refused.code], [503, '5', 'too_many_websockets']);
    const metrics = await (await fetch(`${rt.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    assert.match(metrics, /^sluice_websockets_open 3$/m);
    assert.match(metrics, /^sluice_websockets_limit 3$/m);
    // Upgrades are answered outside the HTTP server: counted in the request histogram all the same.
    const upgrades = (route: string, status: number): string | undefined => new RegExp(`^sluice_http_request_duration_seconds_count\\{route="${route}",method="GET",status="${status}"\\} (\\d+)$`, 'm').exec(metrics)?.[1];
    assert.deepEqual([upgrades('/organizations/:org_id/live', 101), upgrades('/organizations/:org_id/live', 503)], ['2', '2'], 'live: two taken, two refused');
    assert.deepEqual([upgrades('/devices/:org_id/:device', 101), upgrades('/devices/:org_id/:device', 503)], ['1', '1'], 'devices: one taken, one refused');
    sensor.close();
    await sensor.closed;
    const another = await connectOnceFreed(() => connectLive(rt.url, 'acct-ws-b', { token: otherKey }));
    for (const client of [...live, another]) client.close();
  } finally {
    await rt.close();
  }
});

test('one org holds at most three quarters of --websockets, live and device sockets together (429); another org still connects', async () => {
  const rt = await startRuntime({ args: ['--websockets', '8'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-ws-greedy');
    const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-ws-modest');
    const tokens: string[] = [];
    for (const name of ['d-1', 'd-2', 'd-3']) {
      const made = await call(rt.url, 'POST', '/organizations/acct-ws-greedy/devices', { token: key, json: { name } });
      assert.equal(made.status, 201, made.text);
      tokens.push(made.body.token);
    }
    // Each kind's own cap is half the total (4): four live sockets and two devices make six, the org's share.
    const live = await Promise.all([1, 2, 3, 4].map(() => connectLive(rt.url, 'acct-ws-greedy', { token: key })));
    const devices = [await connectDevice(rt.url, 'acct-ws-greedy', 'd-1', tokens[0]!), await connectDevice(rt.url, 'acct-ws-greedy', 'd-2', tokens[1]!)];
    await assert.rejects(connectDevice(rt.url, 'acct-ws-greedy', 'd-3', tokens[2]!), (error: { status: number; body: string }) => {
      assert.equal(error.status, 429);
      assert.equal(JSON.parse(error.body).error.code, 'too_many_org_websockets');
      assert.match(JSON.parse(error.body).error.message, /at most 6 WebSockets open at once, live and device sockets together/);
      return true;
    });
    const other = await connectLive(rt.url, 'acct-ws-modest', { token: otherKey });
    await assert.rejects(connectDevice(rt.url, 'acct-ws-greedy', 'd-3', 'sdt_wrong'), { status: 401 }, 'the share is told only to the device itself');
    // A device replacing its own open socket is not refused at the share: the count comes back.
    const replacement = await connectDevice(rt.url, 'acct-ws-greedy', 'd-2', tokens[1]!);
    assert.equal((await devices[1]!.closed).code, 4409);
    devices[1] = replacement;
    devices[0]!.close();
    await devices[0]!.closed;
    const third = await connectOnceFreed(() => connectDevice(rt.url, 'acct-ws-greedy', 'd-3', tokens[2]!));
    for (const client of [...live, other]) client.close();
    for (const device of [devices[1]!, third]) device.close();
  } finally {
    await rt.close();
  }
});

test('the total defaults to three quarters of the open-file limit less what the process holds at any load, and an org\'s live sockets to half of it when that is under 20,000', () => {
  assert.equal(defaultWebSocketLimit(openFileLimit('Limit                     Soft Limit           Hard Limit           Units\nMax open files            20000                20000                files\n')), 14_952);
  // With the webhook sockets' total and what is set aside, within the limit, low ones too.
  for (const limit of [128, 256, 1024, 20_000]) {
    const cut = defaultWebSocketLimit(limit) + defaultOutboundSocketTotal(limit) + RESERVED_FILES;
    assert.ok(cut <= limit, `${cut} of ${limit}`);
  }
  assert.equal(defaultWebSocketLimit(openFileLimit('Max open files            unlimited            unlimited            files\n')), WEBSOCKETS_FALLBACK);
  assert.equal(defaultWebSocketLimit(openFileLimit('')), WEBSOCKETS_FALLBACK, 'not Linux');
  const small = loadRuntimeConfig(['--websockets', '1000'], {});
  assert.deepEqual([small.websockets, small.liveSocketsPerOrg], [1000, 500]);
  const large = loadRuntimeConfig([], { SLUICE_WEBSOCKETS: '1000000' });
  assert.deepEqual([large.websockets, large.liveSocketsPerOrg], [1_000_000, 20_000]);
  assert.equal(loadRuntimeConfig(['--websockets', '1000', '--live-sockets-per-org', '900'], {}).liveSocketsPerOrg, 900, 'as given');
  assert.throws(() => loadRuntimeConfig(['--websockets', '0'], {}), /--websockets/);
});

/** Connects once the server has counted a close it sees a moment after the client's. */
async function connectOnceFreed<T>(connect: () => Promise<T>): Promise<T> {
  for (let tries = 0; ; tries++) {
    const connected = await connect().catch((error: Error) => (tries < 50 ? undefined : Promise.reject(error)));
    if (connected !== undefined) return connected;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
