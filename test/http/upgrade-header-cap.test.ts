// A WebSocket upgrade is held to the same 16 KiB cap on its request line and headers as a REST
// request (header-cap.ts): uWebSockets.js read 60 KB upgrade heads, and live rooms and devices let
// them in (found by a probe). Real runtime, raw handshakes.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MAX_HEADER_BYTES } from '../../runtime/http/header-cap.ts';
import { createOrg, registerDevice } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { upgradeAnswer } from '../helpers/upgrade-answer.ts';

const ORG = 'acct-upgrade-heads';
let rt: TestRuntime;
let key: string;
let deviceToken: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  deviceToken = await registerDevice(rt.url, ORG, key, 'gate');
});
after(() => rt.close());

test('a live-room or device upgrade whose head is past the cap is 431 headers_too_large; one within it is let in', async () => {
  const big = { 'x-big': 'b'.repeat(MAX_HEADER_BYTES + 600) };
  const live = `${rt.url}/organizations/${ORG}/live?token=${encodeURIComponent(key)}`;
  const device = `${rt.url}/devices/${ORG}/gate?token=${deviceToken}`;
  for (const url of [live, device]) {
    const refused = await upgradeAnswer(url, [], false, big);
    assert.deepEqual([refused.status, refused.code], [431, 'headers_too_large'], url);
    assert.match(refused.message, /exceed 16384 bytes/);
    await assert.rejects(upgradeAnswer(url, [], false, { 'x-small': 'b'.repeat(1000) }), /the upgrade was accepted/, url);
  }
});
