// The `public` webhook target policy: private, loopback, link-local (cloud metadata), CGNAT and
// reserved addresses are refused in every spelling (IPv4-compatible, SIIT, 6to4 and Teredo forms
// too), by literal or by a name that resolves there, without a request being sent and without a
// retry; public addresses pass; `any` allows local ones.

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { OutboundConnections } from '../../runtime/runs/outbound-connections.ts';
import { isPublicAddress } from '../../runtime/runs/webhook-address-policy.ts';
import { sendWebhook, type WebhookOutcome } from '../../runtime/runs/webhook-step.ts';

let server: Server;
let port: number;
let received = 0;
const publicOnly = new OutboundConnections(4, 'public');
const any = new OutboundConnections(4, 'any');
before(async () => {
  server = createServer((req, res) => {
    received += 1;
    req.resume();
    req.on('end', () => res.end('{"AccessKeyId":"internal"}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
after(async () => {
  publicOnly.close();
  any.close();
  await new Promise((resolve) => server.close(resolve));
});

const send = (url: string, connections: OutboundConnections): Promise<WebhookOutcome> =>
  sendWebhook(
    { orgId: 'acct-a', url, headers: {}, timeoutMs: 5000, body: '{}', idempotencyKey: 'run_1:s', fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.UTC(2026, 10, 30) },
    { selfPort: 1, connections },
  );

test('addresses: private, loopback, link-local, CGNAT, multicast and reserved are not public, in v4, v6, mapped and NAT64 forms', () => {
  for (const address of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255', '198.18.0.1',
    '::1', '::', 'fd00::1', 'fe80::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:a9fe:a9fe', '64:ff9b::10.0.0.1', '64:ff9b::a00:1', '64:ff9b:1::7f00:1',
    '::a9fe:a9fe', '::7f00:1', '::ffff:0:7f00:1', '2002:7f00:1::', '2002:a9fe:a9fe::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', 'not-an-ip']) {
    assert.equal(isPublicAddress(address), false, address);
  }
  for (const address of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8']) {
    assert.equal(isPublicAddress(address), true, address);
  }
});

test('under public, a local receiver is refused for good, by literal and by name, and nothing is sent', async () => {
  for (const url of [`http://127.0.0.1:${port}/hook`, `http://[::ffff:127.0.0.1]:${port}/hook`, `http://localhost:${port}/hook`, 'http://169.254.169.254/latest/meta-data/']) {
    const outcome = await send(url, publicOnly);
    assert.ok(!outcome.ok && outcome.error.code === 'webhook_target_forbidden' && !outcome.error.retryable, `${url}: ${JSON.stringify(outcome)}`);
    if (url.includes('localhost')) assert.doesNotMatch(outcome.ok ? '' : outcome.error.message, /127\.0\.0\.1/, 'a name is not told what it resolves to');
  }
  assert.equal(received, 0, 'no request reached the local receiver');
});

test('under any, the same local receiver is reached', async () => {
  const outcome = await send(`http://127.0.0.1:${port}/hook`, any);
  assert.equal(outcome.ok, true, JSON.stringify(outcome));
  assert.equal(received, 1);
});
