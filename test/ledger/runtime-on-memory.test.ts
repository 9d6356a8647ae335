// The whole runtime on the in-memory ledger: real HTTP, a real receiver and a real live socket, with
// no LMDB underneath. Proves the runtime needs nothing of its storage beyond runtime/ledger/ledger.ts.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openMemoryLedger } from '../../runtime/ledger/memory-ledger.ts';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { connectLive, type LiveClient } from '../helpers/live-client.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-memory';
let rt: TestRuntime;
let receiver: Receiver;
let live: LiveClient;
let key: string;
const secret = newStandardSecret();

before(async () => {
  rt = await startRuntime({ ledger: openMemoryLedger(), args: ['--runner', 'off'] });
  receiver = await startReceiver();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const source = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'shop', secrets: [secret] } });
  assert.equal(source.status, 201, source.text);
  const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, {
    token: key,
    json: { name: 'notify', trigger_event: 'order.paid', steps: [{ id: 'notify', type: 'webhook', url: `${receiver.url}/orders` }] },
  });
  assert.equal(workflow.status, 201, workflow.text);
  live = await connectLive(rt.url, ORG, { token: key });
  live.subscribe({});
});
after(async () => {
  live.close();
  await rt.close();
  await receiver.close();
});

test('a signed webhook becomes one run whose step is delivered once, watched live, with duplicates refused', async () => {
  const body = JSON.stringify({ type: 'order.paid', data: { order_id: 'ord_1' } });
  const send = () => call(rt.url, 'POST', `/hooks/${ORG}/shop`, { body, headers: signStandard(secret, 'msg_1', Math.floor(Date.now() / 1000), body) });
  const accepted = await send();
  assert.equal(accepted.status, 204, accepted.text);
  const repeat = await send();
  assert.equal(repeat.status, 409);
  assert.equal(repeat.body.error.original_event_id, accepted.headers.get('sluice-event-id'));

  await live.waitFor(() => live.updates().some((u) => u.state === 'completed'), 'the completed update');
  assert.deepEqual([...new Set(live.updates().map((u) => u.state))], ['queued', 'running', 'completed']);
  const runs = await eventually('the run listed as completed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs`, { token: key })).body.runs as Array<{ state: string }>, (list) => list.length === 1 && list[0]?.state === 'completed');
  assert.equal(runs.length, 1);
  const deliveries = receiver.received.filter((r) => r.path === '/orders');
  assert.equal(deliveries.length, 1, 'the step was delivered exactly once');
  assert.equal(JSON.parse(deliveries[0]?.body ?? '{}').event.payload.data.order_id, 'ord_1');
  assert.equal(existsSync(join(rt.dataDir, 'runtime')), false, 'no LMDB environment was opened');
});
