// One org's idle keep-alive sockets are capped over all its receivers: an org posting to many
// names (each its own origin, each its own pool) kept one idle socket per name, enough to run the
// process out of file descriptors. Past its share, a finished socket closes; another org keeps its
// own; a socket kept idle is reused for the same receiver. Against a real local receiver.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { OutboundConnections } from '../../runtime/runs/outbound-connections.ts';
import { ReceiverResolver } from '../../runtime/runs/receiver-lookup.ts';
import { sendWebhook } from '../../runtime/runs/webhook-step.ts';
import { eventually } from '../helpers/receiver.ts';

const NAMES = Array.from({ length: 20 }, (_, i) => `receiver-${i}.test`);
let server: Server;
let port: number;
let opened = 0;
let dir: string;
let pools: OutboundConnections;

before(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('{"ok":true}'));
  });
  server.on('connection', () => (opened += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  dir = mkdtempSync(join(tmpdir(), 'sluice-hosts-'));
  writeFileSync(join(dir, 'hosts'), `127.0.0.1 ${NAMES.join(' ')}\n`);
  pools = new OutboundConnections(4, 'any', { resolver: new ReceiverResolver({ hostsPath: join(dir, 'hosts') }), idleSocketsPerOrg: 5 });
});
after(async () => {
  pools.close();
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

const send = async (orgId: string, name: string): Promise<void> => {
  const outcome = await sendWebhook(
    { orgId, url: `http://${name}:${port}/hook`, headers: {}, timeoutMs: 5000, body: '{}', idempotencyKey: 'run_1:s', fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.now() },
    { selfPort: 1, connections: pools },
  );
  assert.equal(outcome.ok, true, JSON.stringify(outcome));
};

test("an org posting to twenty receivers keeps at most its share of sockets idle; another org keeps its own; a kept one is reused", async () => {
  for (const name of NAMES) await send('acct-many-names', name);
  assert.equal(opened, NAMES.length, 'one connection per receiver');
  await eventually('the sockets past the share to close', () => pools.stats().open, (open) => open === 5);
  await send('acct-other', NAMES[0]!);
  await eventually('the other org\'s socket to be kept', () => pools.stats().open, (open) => open === 6);
  // The first five receivers' sockets were the ones kept: posting to one again opens nothing.
  await send('acct-many-names', NAMES[1]!);
  assert.equal(opened, NAMES.length + 1, 'only the other org\'s request opened a connection');
});
