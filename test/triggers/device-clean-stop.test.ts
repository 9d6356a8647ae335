// A clean stop (SIGTERM) with device messages being stored: each is acked before the socket closes
// (1001), as a token rotation or a deletion does, so a device need not send again what the stop
// stored. A gate holds one message's store open while the runtime begins to close.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { IngestQuota } from '../../runtime/ingest/ingest-quota.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-device-stop';
let rt: TestRuntime;
let key: string;
let closing: Promise<void> | undefined;

/** The first device message's store waits here until released. */
let held: { reached: () => void; release: Promise<void> } | undefined;
const quota = IngestQuota.prototype as unknown as { storeEvent: (...args: unknown[]) => Promise<unknown> };
const { storeEvent } = quota;
quota.storeEvent = async function (this: unknown, ...args: unknown[]) {
  const gate = held;
  held = undefined;
  if (gate !== undefined) {
    gate.reached();
    await gate.release;
  }
  return storeEvent.apply(this, args);
};

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => {
  quota.storeEvent = storeEvent;
  await (closing ?? rt.close());
});

test('a message being stored when the runtime stops is acked before its socket closes; one sent after is nacked connection_closing', async () => {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'meter-1' } });
  assert.equal(created.status, 201, created.text);
  const device = await connectDevice(rt.url, ORG, 'meter-1', created.body.token);
  let release = (): void => undefined;
  const reached = new Promise<void>((resolve) => {
    held = { reached: resolve, release: new Promise<void>((done) => (release = done)) };
  });
  device.send({ id: 'm-1', type: 'reading.taken', payload: { kwh: 1 } });
  await reached;

  closing = rt.close();
  // The stop has begun for the device once a later message is refused.
  let n = 0;
  await device.waitFor(() => {
    if (device.frames.some((f) => f.type === 'nack' && f.error?.code === 'connection_closing')) return true;
    device.send({ id: `late-${++n}`, type: 'reading.taken', payload: {} });
    return false;
  }, 'a message sent during the stop to be refused');
  release();

  const ended = await device.closed;
  assert.equal(ended.code, 1001);
  const answer = device.frames.find((f) => f.id === 'm-1');
  assert.deepEqual([answer?.type, answer?.duplicate], ['ack', false], 'the message the stop stored was acked before the close');
  await closing;
});
