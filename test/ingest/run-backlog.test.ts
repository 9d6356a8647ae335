// Backpressure on an org's run queue (--max-queued-runs): while the org has that many runs waiting
// for a concurrency slot, its new events (API, signed webhooks, device messages) are refused with
// 429 run_backlog_full and a Retry-After, nothing stored; a duplicate still gets its 409, another
// org and the org's sandbox are not held back, and once the queue drains the same event is taken.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg, registerDevice, signStandard } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';
import { holdLedgerWrites, type WriteHold } from '../helpers/lmdb-write-hold.ts';

const ORG = 'acct-backlog';
const SECRET = `whsec_${Buffer.alloc(32, 21).toString('base64')}`;

test('an org with --max-queued-runs runs waiting is refused new events until they drain; nothing of a refused one is kept', async () => {
  const rt = await startRuntime({ args: ['--max-queued-runs', '2'] });
  let releaseFirst: () => void = () => undefined;
  const receiver = await startReceiver([{ status: 200, body: '{}', after: new Promise<void>((resolve) => (releaseFirst = resolve)) }, { status: 200, body: '{}' }]);
  try {
    const created = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: ORG, name: ORG, plan: 'pro', max_concurrent_runs: 1 } });
    assert.equal(created.status, 201, created.text);
    const key = created.body.api_key as string;
    const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'notify', trigger_event: 'order.placed', steps: [{ id: 'send', type: 'webhook', url: receiver.url }] } });
    assert.equal(workflow.status, 201, workflow.text);
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'in', secrets: [SECRET] } })).status, 201);
    const deviceToken = await registerDevice(rt.url, ORG, key, 'till');
    const device = await connectDevice(rt.url, ORG, 'till', deviceToken);
    const post = (id: string, type = 'order.placed') => call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { id, type, payload: {} } });

    // The first run holds the org's one slot (its request held by the receiver); two wait for it.
    assert.equal((await post('ord-1')).status, 202);
    await eventually('the first run out', () => receiver.received.length, (n) => n === 1);
    assert.equal((await post('ord-2')).status, 202);
    assert.equal((await post('ord-3')).status, 202);

    const refused = await post('ord-4');
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.body.error.code, 'run_backlog_full');
    assert.match(refused.body.error.message, /has reached its cap of 2 production runs waiting for a concurrency slot/);
    assert.equal(refused.headers.get('retry-after'), '5');
    assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/events/ord-4`, { token: key })).status, 404, 'nothing stored');
    assert.equal((await post('ord-5', 'nobody.listens')).status, 429, 'every new event of the org waits, whether it starts runs or not');
    assert.equal((await post('ord-2')).status, 409, 'a duplicate still gets its 409');

    const body = JSON.stringify({ type: 'order.placed', data: {} });
    const hook = await call(rt.url, 'POST', `/hooks/${ORG}/in`, { body, headers: signStandard(SECRET, 'msg-1', Math.floor(Date.now() / 1000), body) });
    assert.equal(hook.status, 429, hook.text);
    assert.equal(hook.body.error.code, 'run_backlog_full');
    device.send({ id: 'm-1', type: 'reading', payload: {} });
    const nack = await device.answerTo('m-1');
    assert.deepEqual([nack.type, nack.error?.code, nack.retryable, nack.retry_after_ms], ['nack', 'run_backlog_full', true, 5000]);

    const sandboxEvent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.placed', payload: {}, environment: 'sandbox' } });
    assert.equal(sandboxEvent.status, 202, 'the sandbox queues apart: production\'s full queue refuses none of its events');
    const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-backlog-other');
    assert.equal((await call(rt.url, 'POST', '/organizations/acct-backlog-other/events', { token: otherKey, json: { type: 'order.placed', payload: {} } })).status, 202, 'another org is not held back');

    releaseFirst();
    await eventually('the queue drained', () => receiver.received.length, (n) => n === 3);
    // The next request is held again: ord-4's run keeps the slot.
    receiver.script([{ status: 200, body: '{}', after: new Promise<void>((resolve) => (releaseFirst = resolve)) }, { status: 200, body: '{}' }]);
    assert.equal((await post('ord-4')).status, 202, 'taken once the runs drained');
    device.close();
    // A burst sent at once: runs whose writes are in flight count before they reach the queue, so
    // the burst is held to the cap (two waiting behind the run out) rather than all stored in one flush.
    await eventually('ord-4 run out', () => receiver.received.length, (n) => n === 4);
    const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => post(`burst-${i}`)));
    assert.deepEqual(burst.filter((answer) => answer.status === 202).length, 2, 'two wait behind the run out; the rest are refused');
    assert.ok(burst.every((answer) => answer.status === 202 || answer.body.error?.code === 'run_backlog_full'));
  } finally {
    releaseFirst();
    await rt.close();
    await receiver.close();
  }
});

test('sandbox runs being written count against the sandbox backlog alone, not production\'s', { timeout: 60_000 }, async () => {
  // A data dir of its own: on LMDB, whose write lock another process can hold.
  const dataDir = tempDir();
  const rt = await startRuntime({ dataDir, args: ['--max-queued-runs', '3'] });
  const receiver = await startReceiver([{ status: 200, body: '{}' }]);
  let hold: WriteHold | undefined;
  try {
    const org = 'acct-backlog-envs';
    const created = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: org, name: org, plan: 'pro', max_concurrent_runs: 1 } });
    const key = created.body.api_key as string;
    for (let i = 0; i < 5; i++) {
      const workflow = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: `load-${i}`, trigger_event: 'load.test', environment: 'sandbox', steps: [{ id: 'send', type: 'webhook', url: receiver.url }] } });
      assert.equal(workflow.status, 201, workflow.text);
    }
    hold = await holdLedgerWrites(dataDir);
    // Its write waits for the lock: one run admitted on the spot, four queued and being written.
    const sandboxEvent = call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'load.test', payload: {}, environment: 'sandbox' } });
    const { engine } = rt.runtime;
    await eventually('four sandbox runs being written', () => engine.queuedRuns(org, 'sandbox'), (n) => n === 4);
    assert.equal(engine.queuedRuns(org, 'production'), 0, 'production\'s backlog holds none of them');
    await hold.release();
    hold = undefined;
    assert.equal((await sandboxEvent).status, 202);
  } finally {
    await hold?.release();
    await rt.close();
    await receiver.close();
  }
});
