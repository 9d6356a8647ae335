// The clocks of prune-time.ts: the time prunes measure ages against is the wall clock, never further
// ahead than the monotonic time since the start (a clock set back is followed); the time claims are
// dated by is the wall clock, never further behind it (a clock set forward is followed); a clock with
// no monotonic reading (a test's manual clock) is taken as it is by both.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../runtime/clock.ts';
import { claimDatingTime, pruneTime } from '../runtime/prune-time.ts';

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

test('a wall clock set back moves the claim dating time back no further than the time that passed', () => {
  let wall = T;
  let passed = 5_000;
  const now = claimDatingTime({ now: () => wall, monotonic: () => passed });
  assert.equal(now(), T);
  wall -= 8 * 24 * HOUR;
  assert.equal(now(), T, 'eight days behind on the wall, none passed');
  passed += 60_000;
  assert.equal(now(), T + 60_000, 'a minute passed');
  wall = T + HOUR;
  assert.equal(now(), T + HOUR, 'a clock set forward is followed');
});

test('a clock without a monotonic reading is the prune time and the claim dating time as it is', () => {
  const clock = new ManualClock(T);
  const prunes = pruneTime(clock);
  const dates = claimDatingTime(clock);
  clock.advance(30 * 24 * HOUR);
  assert.equal(prunes(), T + 30 * 24 * HOUR);
  clock.advance(-HOUR);
  assert.equal(dates(), T + 29 * 24 * HOUR + 23 * HOUR);
});
