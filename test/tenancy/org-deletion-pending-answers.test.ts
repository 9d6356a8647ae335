// What comes for an org while its deletion mark is being written (the org fenced off, the mark not
// yet on disk) is stored nowhere, and answered as such: `503 organization_deletion_pending` with a
// Retry-After (a device message: a retryable nack). Sent again, it is taken when the mark failed (the
// org stays; a webhook delivery is not a duplicate) and refused 404 once the mark went through. Such
// requests were answered 404 in that window, as if the org were gone, even when it then stayed.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectDevice, type DeviceClient } from '../helpers/device-client.ts';
import { call, createOrg, newStandardSecret, signStandard, type CallResult } from '../helpers/http.ts';
import { deletionHeld } from '../helpers/held-deletion.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

interface Org {
  readonly id: string;
  readonly key: string;
  readonly secret: string;
  readonly device: DeviceClient;
}

async function setUp(rt: TestRuntime, id: string): Promise<Org> {
  const key = await createOrg(rt.url, ADMIN_TOKEN, id);
  const secret = newStandardSecret();
  const source = await call(rt.url, 'POST', `/organizations/${id}/sources`, { token: key, json: { name: 'shop', secrets: [secret] } });
  assert.equal(source.status, 201, source.text);
  const created = await call(rt.url, 'POST', `/organizations/${id}/devices`, { token: key, json: { name: 'meter' } });
  assert.equal(created.status, 201, created.text);
  return { id, key, secret, device: await connectDevice(rt.url, id, 'meter', created.body.token as string) };
}

const BODY = JSON.stringify({ type: 'orders.created', order: 7 });

/** The same three writes each time: an API event with its own id, a webhook delivery, a device message. */
async function sendAll(rt: TestRuntime, org: Org): Promise<{ api: CallResult; hook: CallResult; message: Record<string, unknown> }> {
  const api = await call(rt.url, 'POST', `/organizations/${org.id}/events`, { token: org.key, json: { id: 'order-7', type: 'orders.created', payload: {} } });
  const hook = await call(rt.url, 'POST', `/hooks/${org.id}/shop`, { body: BODY, headers: signStandard(org.secret, 'msg-order-7', Math.floor(Date.now() / 1000), BODY) });
  org.device.send({ id: 'reading-7', type: 'reading.taken', payload: { kwh: 7 } });
  const message = await org.device.answerTo('reading-7');
  org.device.frames.length = 0;
  return { api, hook, message };
}

function assertPending(sent: Awaited<ReturnType<typeof sendAll>>): void {
  for (const answer of [sent.api, sent.hook]) {
    assert.equal(answer.status, 503, answer.text);
    assert.equal(answer.body.error.code, 'organization_deletion_pending');
    assert.equal(answer.headers.get('retry-after'), '1');
  }
  assert.deepEqual(
    { type: sent.message.type, code: (sent.message.error as { code: string }).code, retryable: sent.message.retryable, retry_after_ms: sent.message.retry_after_ms },
    { type: 'nack', code: 'organization_deletion_pending', retryable: true, retry_after_ms: 1000 },
  );
}

test('writes refused while the deletion mark is written are answered 503 to send again, and taken when the mark fails', async () => {
  const rt = await startRuntime({ args: ['--runner', 'off'] });
  try {
    const org = await setUp(rt, 'acct-pending-fails');
    const viewer = await call(rt.url, 'POST', `/organizations/${org.id}/api-keys`, { token: org.key, json: { role: 'viewer' } });
    assert.equal(viewer.status, 201, viewer.text);
    const scale = await call(rt.url, 'POST', `/organizations/${org.id}/devices`, { token: org.key, json: { name: 'scale', environment: 'sandbox' } });
    assert.equal(scale.status, 201, scale.text);
    const sandboxDevice = await connectDevice(rt.url, org.id, 'scale', scale.body.token as string);
    const deletion = await deletionHeld(rt, org.id);
    try {
      assertPending(await sendAll(rt, org));
      // Changes that would end sockets or keys wrote nothing either: the key and the device's socket hold.
      const revoke = await call(rt.url, 'DELETE', `/organizations/${org.id}/api-keys/${viewer.body.id as string}`, { token: org.key });
      assert.equal(revoke.status, 503, revoke.text);
      const removeDevice = await call(rt.url, 'DELETE', `/organizations/${org.id}/devices/meter`, { token: org.key });
      assert.equal(removeDevice.status, 503, removeDevice.text);
      // A sandbox reset whose first write was refused removed nothing: its sockets stay too.
      const reset = await call(rt.url, 'POST', `/organizations/${org.id}/sandbox/reset`, { token: org.key });
      assert.deepEqual([reset.status, reset.body.error.code], [503, 'organization_deletion_pending'], reset.text);
      deletion.release();
      assert.equal((await deletion.answer).status, 500);
    } finally {
      deletion.done();
    }
    const read = await call(rt.url, 'GET', `/organizations/${org.id}/events?limit=1`, { token: viewer.body.key as string });
    assert.equal(read.status, 200, `the viewer key holds: ${read.text}`);
    const again = await sendAll(rt, org);
    assert.equal(again.api.status, 202, again.api.text);
    assert.equal(again.hook.status, 204, again.hook.text);
    assert.equal(again.message.type, 'ack');
    assert.equal(again.message.duplicate, false);
    const events = await call(rt.url, 'GET', `/organizations/${org.id}/events?limit=10`, { token: org.key });
    assert.equal(events.status, 200, events.text);
    const stored = (events.body.events as Array<{ type: string }>).map((event) => event.type).filter((type) => type !== 'device.connected');
    assert.deepEqual(stored.sort(), ['orders.created', 'orders.created', 'reading.taken'], 'each stored once, when sent again');
    sandboxDevice.send({ id: 'weight-1', type: 'weight.taken', payload: { g: 5 } });
    assert.equal((await sandboxDevice.answerTo('weight-1')).type, 'ack', 'the sandbox socket stayed open');
    org.device.close(1000);
    sandboxDevice.close(1000);
  } finally {
    await rt.close();
  }
});

test('writes refused while a deletion mark is written that then goes through are 404 when sent again', async () => {
  const rt = await startRuntime({ args: ['--runner', 'off'] });
  try {
    const org = await setUp(rt, 'acct-pending-goes');
    const deletion = await deletionHeld(rt, org.id, false);
    try {
      assertPending(await sendAll(rt, org));
      deletion.release();
      assert.equal((await deletion.answer).status, 202);
    } finally {
      deletion.done();
    }
    assert.equal((await org.device.closed).code, 4404);
    // Its keys go with it (401): the platform admin is told the org is gone.
    const api = await call(rt.url, 'POST', `/organizations/${org.id}/events`, { token: ADMIN_TOKEN, json: { id: 'order-7', type: 'orders.created', payload: {} } });
    assert.equal(api.status, 404, api.text);
    const hook = await call(rt.url, 'POST', `/hooks/${org.id}/shop`, { body: BODY, headers: signStandard(org.secret, 'msg-order-7', Math.floor(Date.now() / 1000), BODY) });
    assert.equal(hook.status, 404, hook.text);
  } finally {
    await rt.close();
  }
});
