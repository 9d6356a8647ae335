// The token of a WebSocket upgrade, live room or device socket, may come in `?token=` or beside the
// endpoint's subprotocol; given both ways with different values the upgrade is refused (400
// conflicting_tokens) instead of answering for one of them, and the same value both ways is fine.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { DEVICE_PROTOCOL } from '../../runtime/triggers/device-upgrade.ts';
import { LIVE_PROTOCOL } from '../../runtime/rooms/live-upgrade.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { upgradeAnswer } from '../helpers/upgrade-answer.ts';

const ORG = 'acct-upgrade-token';
let rt: TestRuntime;
let key: string;
let deviceToken: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const device = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'till' } });
  assert.equal(device.status, 201, device.text);
  deviceToken = device.body.token;
});
after(async () => rt.close());

/** The two upgrades that take a token: a live room (the org's API key) and a device socket (its token). */
const endpoints = (): Array<{ url: string; protocol: string; token: string }> => [
  { url: `${rt.url}/organizations/${ORG}/live`, protocol: LIVE_PROTOCOL, token: key },
  { url: `${rt.url}/devices/${ORG}/till`, protocol: DEVICE_PROTOCOL, token: deviceToken },
];

test('two different tokens are 400 conflicting_tokens; the same one twice is accepted', async () => {
  for (const { url, protocol, token } of endpoints()) {
    const conflicting = await upgradeAnswer(`${url}?token=${encodeURIComponent(token)}`, [protocol, 'not-the-token']);
    assert.deepEqual([conflicting.status, conflicting.code], [400, 'conflicting_tokens'], url);
    assert.match(conflicting.message, /given twice, in \?token= and in Sec-WebSocket-Protocol, with different values/);
    await assert.rejects(upgradeAnswer(`${url}?token=${encodeURIComponent(token)}`, [protocol, token]), /the upgrade was accepted/, `${url}: the same token both ways`);
    await assert.rejects(upgradeAnswer(`${url}?token=`, [protocol, token]), /the upgrade was accepted/, `${url}: an empty ?token= is none`);
  }
});

test('the subprotocols hold at most one token: two different ones are 400 conflicting_tokens, even with no ?token=', async () => {
  for (const { url, protocol, token } of endpoints()) {
    for (const offered of [[protocol, token, 'junk'], [protocol, 'junk', token]]) {
      const refused = await upgradeAnswer(url, offered);
      assert.deepEqual([refused.status, refused.code], [400, 'conflicting_tokens'], `${url} ${offered.slice(1).join(', ')}`);
      assert.match(refused.message, /offers 2 different entries besides sluice-(live|device); give the token once/);
    }
    await assert.rejects(upgradeAnswer(url, [protocol, token, token]), /the upgrade was accepted/, `${url}: the same token twice is one`);
  }
});

test('subprotocols on several header lines make one list: the token on the second line is read', async () => {
  for (const { url, protocol, token } of endpoints()) {
    await assert.rejects(upgradeAnswer(url, [protocol, token], true), /the upgrade was accepted/, url);
    const wrong = await upgradeAnswer(url, [protocol, 'not-the-token'], true);
    assert.equal(wrong.status, 401, `${url}: the second line's token is the one checked`);
  }
});
