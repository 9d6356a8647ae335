// The time prunes measure ages against (prune-time.ts): the wall clock, never further ahead than
// the monotonic time since the start; a clock set back is followed; a clock with no monotonic
// reading (a test's manual clock) is taken as it is.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../runtime/clock.ts';
import { pruneTime } from '../runtime/prune-time.ts';

const T = Date.UTC(2026, 11, 6, 12, 0, 0);
const HOUR = 3_600_000;

test('a wall clock set forward moves the prune time no further than the time that passed', () => {
  let wall = T;
  let passed = 5_000;
  const now = pruneTime({ now: () => wall, monotonic: () => passed });
  assert.equal(now(), T);
  wall += 8 * 24 * HOUR;
  assert.equal(now(), T, 'eight days ahead on the wall, none passed');
  passed += 60_000;
  assert.equal(now(), T + 60_000, 'a minute passed');
  wall = T - HOUR;
  assert.equal(now(), T - HOUR, 'a clock set back is followed');
  wall = T + 2 * HOUR;
  passed += HOUR;
  assert.equal(now(), T + HOUR + 60_000);
});

test('a clock without a monotonic reading is the prune time as it is', () => {
  const clock = new ManualClock(T);
  const now = pruneTime(clock);
  clock.advance(30 * 24 * HOUR);
  assert.equal(now(), T + 30 * 24 * HOUR);
});
