// A caller's deadline, read from the wall clock once and kept by the monotonic clock: a wall clock
// stepped forward while a call waits does not make it read as given up.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deadlinePassed } from '../../hook-runner/call-deadline.ts';

test('the deadline passes after the time left when the call came, whatever the wall clock does meanwhile', () => {
  let monotonic = 500;
  const wallAtArrival = Date.UTC(2026, 11, 6, 3, 0, 0);
  const passed = deadlinePassed(new Date(wallAtArrival + 30_000), wallAtArrival, () => monotonic);
  assert.equal(passed(), false);
  // The wall clock jumps an hour ahead: nothing here reads it any more.
  monotonic += 29_999;
  assert.equal(passed(), false, 'a millisecond left');
  monotonic += 1;
  assert.equal(passed(), true);
  assert.equal(deadlinePassed(Infinity, wallAtArrival, () => monotonic)(), false, 'no deadline');
  assert.equal(deadlinePassed(wallAtArrival - 1, wallAtArrival, () => monotonic)(), true, 'already past when it came');
});
