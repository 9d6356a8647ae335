// The pauses of devices whose sockets did not wait out their quota nacks: how long each lasts,
// how a repeat doubles it up to the cap, how a device that behaved for a while starts afresh, and
// that ended pauses do not pile up.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConnectPausedError, ConnectPauses, MAX_CONNECT_PAUSE_MS, MIN_CONNECT_PAUSE_MS } from '../../runtime/triggers/connect-pauses.ts';

type Device = { readonly org_id: string; readonly id: string };
const dev = (org: string, id: string): Device => ({ org_id: org, id });

/** The ms a connect at `now` is told to wait, or 0 when it may connect. */
function refusedFor(pauses: ConnectPauses, device: Device, now: number): number {
  try {
    pauses.assertMayConnect(device, now);
    return 0;
  } catch (error) {
    assert.ok(error instanceof ConnectPausedError);
    assert.equal(error.status, 429);
    assert.equal(error.code, 'connect_paused');
    return error.retryAfterMs;
  }
}

test('a pause lasts the moment the socket was told, a second at the least; other devices may connect', () => {
  const pauses = new ConnectPauses();
  assert.equal(pauses.pause(dev('org', 'a'), 0, 20), MIN_CONNECT_PAUSE_MS);
  assert.equal(refusedFor(pauses, dev('org', 'a'), 0), MIN_CONNECT_PAUSE_MS);
  assert.equal(refusedFor(pauses, dev('org', 'a'), 999), 1);
  assert.equal(refusedFor(pauses, dev('org', 'a'), 1000), 0);
  assert.equal(refusedFor(pauses, dev('org', 'b'), 0), 0, 'another device is not paused');
  assert.equal(refusedFor(pauses, dev('other', 'a'), 0), 0, 'nor a device of its id in another org');
  assert.equal(pauses.pause(dev('org', 'b'), 0, 4_500), 4_500, 'a later moment is waited out whole');
});

test('closed again soon after its pause, a device waits twice as long, up to the cap; after a quiet while it starts afresh', () => {
  const pauses = new ConnectPauses();
  let now = 0;
  const lengths: number[] = [];
  for (let close = 0; close < 9; close += 1) {
    const length = pauses.pause(dev('org', 'loop'), now, 10);
    lengths.push(length);
    now += length; // reconnects the moment it may, and is closed again at once
  }
  assert.deepEqual(lengths, [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, MAX_CONNECT_PAUSE_MS, MAX_CONNECT_PAUSE_MS, MAX_CONNECT_PAUSE_MS]);
  assert.equal(pauses.pause(dev('org', 'loop'), now + MAX_CONNECT_PAUSE_MS - 1, 10), MAX_CONNECT_PAUSE_MS, 'closed just inside the window after its pause ended');
  now += 2 * MAX_CONNECT_PAUSE_MS - 1;
  assert.equal(pauses.pause(dev('org', 'loop'), now + MAX_CONNECT_PAUSE_MS, 10), MIN_CONNECT_PAUSE_MS, 'a whole window without a close: afresh');
});

test('a device paused takes no quota on credit to connect until a whole window has passed since its pause ended', () => {
  const pauses = new ConnectPauses();
  assert.equal(pauses.mayTakeCredit(dev('org', 'a'), 0), true, 'never paused');
  const length = pauses.pause(dev('org', 'a'), 0, 10);
  assert.equal(pauses.mayTakeCredit(dev('org', 'a'), 0), false);
  assert.equal(pauses.mayTakeCredit(dev('org', 'a'), length + MAX_CONNECT_PAUSE_MS - 1), false, 'a close now would still double its pause');
  assert.equal(pauses.mayTakeCredit(dev('org', 'a'), length + MAX_CONNECT_PAUSE_MS), true);
  assert.equal(pauses.mayTakeCredit(dev('org', 'b'), 0), true, 'another device');
});

test('ended pauses are let go of as new ones come, live ones kept', () => {
  const pauses = new ConnectPauses();
  for (let device = 0; device < 1000; device += 1) pauses.pause(dev('org', `old-${device}`), 0, 10);
  const later = MIN_CONNECT_PAUSE_MS + MAX_CONNECT_PAUSE_MS;
  for (let device = 0; device < 100; device += 1) pauses.pause(dev('org', `new-${device}`), later, 10);
  assert.ok(pauses.size < 200, `${pauses.size} held: the ended ones were swept`);
  assert.equal(refusedFor(pauses, dev('org', 'new-0'), later), MIN_CONNECT_PAUSE_MS, 'a live pause survives the sweep');
  assert.equal(refusedFor(pauses, dev('org', 'old-0'), later), 0);
});

test('a wall clock set back an hour does not lock a device out for the hour: its pause ends its length from the connect that finds it so far ahead', () => {
  const pauses = new ConnectPauses();
  const T = 10_000_000;
  assert.equal(pauses.pause(dev('org', 'a'), T, 2_000), 2_000);
  const back = T - 3_600_000;
  assert.equal(refusedFor(pauses, dev('org', 'a'), back), 2_000);
  assert.equal(refusedFor(pauses, dev('org', 'a'), back + 1_999), 1);
  assert.equal(refusedFor(pauses, dev('org', 'a'), back + 2_000), 0);
});

test('a wall clock set back after a pause ended does not put it back on, nor take the device\'s credit again', () => {
  const pauses = new ConnectPauses();
  const T = 10_000_000;
  assert.equal(pauses.pause(dev('org', 'a'), T, 10), MIN_CONNECT_PAUSE_MS);
  // Ten minutes later another device connects: the time is seen.
  assert.equal(refusedFor(pauses, dev('org', 'b'), T + 600_000), 0);
  const back = T + 600_000 - 3_600_000;
  assert.equal(refusedFor(pauses, dev('org', 'a'), back), 0, 'its pause had ended');
  assert.equal(pauses.mayTakeCredit(dev('org', 'a'), back), true, 'and a whole window before the set back');
});
