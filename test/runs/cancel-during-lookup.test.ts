// A run cancelled while its webhook's new connection is still opening (here: the receiver's name
// still resolving) never sends the request: the run is asked again once the connection is open,
// before anything is written, and the attempt's record says it was withdrawn.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ReceiverResolver } from '../../runtime/runs/receiver-lookup.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-cancel-lookup';
let rt: TestRuntime;
let dns: TestDnsServer;
let receiver: Receiver;
let hostsDir: string;
let key: string;
let answerLookup: () => void = () => undefined;

before(async () => {
  dns = await startDnsServer({ 'slow.test': { a: '127.0.0.1', until: new Promise<void>((resolve) => (answerLookup = resolve)) } });
  hostsDir = mkdtempSync(join(tmpdir(), 'sluice-hosts-'));
  writeFileSync(join(hostsDir, 'hosts'), '127.0.0.1 localhost\n');
  rt = await startRuntime({ receiverResolver: new ReceiverResolver({ hostsPath: join(hostsDir, 'hosts'), servers: [dns.address] }) });
  receiver = await startReceiver();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => {
  answerLookup();
  await rt.close();
  await receiver.close();
  await dns.close();
  rmSync(hostsDir, { recursive: true, force: true });
});

const api = (method: string, path: string, json?: unknown) => call(rt.url, method, `/organizations/${ORG}${path}`, { token: key, ...(json === undefined ? {} : { json }) });

test('a run cancelled while its receiver\'s name resolves sends nothing once it resolves; its attempt is withdrawn', async () => {
  const url = `http://slow.test:${new URL(receiver.url).port}/hook`;
  assert.equal((await api('POST', '/workflows', { name: 'notify', trigger_event: 'order.placed', steps: [{ id: 'send', type: 'webhook', url, timeout_ms: 30_000 }] })).status, 201);
  assert.equal((await api('POST', '/events', { type: 'order.placed', id: 'evt-cancel-lookup', payload: {} })).status, 202);
  const reactions = await eventually('the run', async () => (await api('GET', '/events/evt-cancel-lookup')).body.reactions as Array<{ run_id: string }>, (list) => list.length === 1);
  const runId = reactions[0]!.run_id;
  await eventually('the receiver\'s name asked', () => dns.queries.get('slow.test') ?? 0, (asked) => asked >= 1);

  const cancelled = await api('POST', `/runs/${runId}/cancel`);
  assert.equal(cancelled.status, 200, cancelled.text);
  assert.equal(cancelled.body.run.state, 'cancelled');
  answerLookup();
  const run = await eventually('the withdrawn attempt recorded', async () => (await api('GET', `/runs/${runId}`)).body.run, (view) => view.steps[0].attempts[0].after_cancel != null);
  const attempt = run.steps[0].attempts[0];
  assert.equal(attempt.after_cancel.error.code, 'webhook_withdrawn', JSON.stringify(attempt.after_cancel));
  assert.equal(attempt.started_at, null, 'it never started');
  // The receiver is reachable: a run that is not cancelled gets through it (and shows the name resolves).
  assert.equal((await api('POST', '/events', { type: 'order.placed', id: 'evt-after-lookup', payload: {} })).status, 202);
  await eventually('the next run\'s request', () => receiver.received.length, (count) => count === 1);
  assert.deepEqual(receiver.received.map((request) => request.headers['idempotency-key']).filter((k) => String(k).startsWith(runId)), [], 'the cancelled run sent nothing');
});
