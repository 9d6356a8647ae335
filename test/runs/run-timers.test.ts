// Run timers on an injected clock: a timer fires once at its time, a disarmed or re-armed one does
// not fire at its old time, and the heap sheds the entries they leave behind instead of keeping
// them until their (possibly days away) due time.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { RunTimers } from '../../runtime/runs/run-timers.ts';

test('each timer fires once, at its latest time; disarmed ones never', () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  const timers = new RunTimers(clock, (key) => fired.push(key));
  timers.arm('a', 10);
  timers.arm('b', 20);
  timers.arm('a', 30);
  timers.arm('c', 15);
  timers.disarm('c');
  clock.advance(20);
  assert.equal(timers.fireDue(), 1);
  clock.advance(10);
  assert.equal(timers.fireDue(), 1);
  assert.deepEqual(fired, ['b', 'a']);
  assert.equal(timers.size, 0);
  timers.close();
});

test('many disarmed and re-armed timers far in the future do not pile up in the heap', () => {
  const clock = new ManualClock(0);
  const timers = new RunTimers(clock, () => undefined);
  const week = 7 * 86_400_000;
  for (let i = 0; i < 20_000; i++) {
    timers.arm(`run-${i}`, week + i);
    if (i % 2 === 0) timers.disarm(`run-${i}`);
    else timers.arm(`run-${i}`, 2 * week + i);
  }
  assert.equal(timers.size, 10_000);
  assert.ok(timers.heapLength <= 2 * timers.size + 1, `heap of ${timers.heapLength} for ${timers.size} live timers`);
  clock.advance(3 * week);
  assert.equal(timers.fireDue(), 10_000, 'every live timer still fires, once');
  assert.equal(timers.heapLength, 0);
  timers.close();
});
