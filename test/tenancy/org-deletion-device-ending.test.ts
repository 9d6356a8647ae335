// A device connection's ending whose write the org fence refused while the org's deletion mark was
// being written, a mark that then failed: the ending is tried again after its pause, as after any
// failed write. It counted as done, and the ledger held the connection open (found by a review).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { FIRST_RETRY_MS } from '../../runtime/ledger/write-retries.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { deletionHeld, queuedWritesRun } from '../helpers/held-deletion.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-failed-mark-device';

test('an ending refused while the deletion was written, a mark that then failed, is written after its pause', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 1, 12));
  const rt = await startRuntime({ args: ['--runner', 'off'], clock });
  const gates: Array<{ done: () => void }> = [];
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'kiosk' } });
    assert.equal(created.status, 201, created.text);
    const device = await connectDevice(rt.url, ORG, 'kiosk', created.body.token as string);

    // The ending's write (a transaction: the connection's record and its event) is held before it is issued.
    const ending = gateNextCall(rt.runtime.ledger.root, 'transaction');
    gates.push(ending);
    device.close(1000);
    await device.closed;
    await ending.whenReached;
    const deletion = await deletionHeld(rt, ORG);
    gates.push(deletion);
    ending.release();
    // Once the writes queued before are over, the ending was refused.
    await queuedWritesRun(rt.runtime.ledger.root);
    deletion.release();
    assert.equal((await deletion.answer).status, 500);

    const { endingRetries } = rt.runtime.devices;
    await eventually('the ending waiting to be written again', () => endingRetries.size, (size) => size === 1);
    assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/devices/kiosk`, { token: key })).body.device.state, 'connected');
    clock.advance(FIRST_RETRY_MS);
    endingRetries.timers.fireDue();
    const read = await eventually('the ending written', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/devices/kiosk`, { token: key })).body.device, (found) => found.state === 'disconnected');
    assert.equal(read.last_disconnect_reason, 'client_closed');
  } finally {
    for (const gate of gates) gate.done();
    await rt.close();
  }
});
