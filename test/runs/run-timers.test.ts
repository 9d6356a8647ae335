// Run timers on an injected clock: a timer fires once at its time, a disarmed or re-armed one does
// not fire at its old time, and the heap sheds the entries they leave behind instead of keeping
// them until their (possibly days away) due time. A clock set back is told to the owner once. Many
// timers due at once fire a batch per event-loop turn, orgs in turn.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { FIRE_BATCH, RunTimers } from '../../runtime/runs/run-timers.ts';
import { orgScopedKey } from '../../runtime/tenancy/org-scoped-key.ts';

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
  let fired = 0;
  for (let pass = timers.fireDue(); pass > 0; pass = timers.fireDue()) fired += pass;
  assert.equal(fired, 10_000, 'every live timer still fires, once');
  assert.equal(timers.heapLength, 0);
  timers.close();
});

test('many timers due at once fire FIRE_BATCH per event-loop turn, the rest on their own in the next turns', async () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  const timers = new RunTimers(clock, (key) => fired.push(key));
  const count = 3 * FIRE_BATCH + 1;
  for (let i = 0; i < count; i++) timers.arm(`run-${i}`, 1000 + i);
  clock.advance(1000 + count);
  assert.equal(timers.fireDue(), FIRE_BATCH);
  // A timer of the next turn runs before the rest: the loop turned between the batches.
  const turned = new Promise<number>((resolve) => setImmediate(() => resolve(fired.length)));
  assert.equal(await turned, FIRE_BATCH, 'nothing more fired in the same turn');
  const deadline = Date.now() + 2000;
  while (fired.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(fired.length, count);
  assert.equal(new Set(fired).size, count, 'each once');
  assert.equal(timers.size, 0);
  timers.close();
});

test('timers due together fire orgs in turn: one org\'s thousands due first do not hold back another org\'s due a moment later', () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  const timers = new RunTimers(clock, (key) => fired.push(key));
  const flood = 4 * FIRE_BATCH;
  for (let i = 0; i < flood; i++) timers.arm(orgScopedKey('acct-flood', `run-${i}`), 1000 + i);
  timers.arm(orgScopedKey('acct-quiet', 'run-q'), 1000 + flood);
  clock.advance(1000 + flood);
  assert.equal(timers.fireDue(), FIRE_BATCH);
  assert.ok(fired.includes(orgScopedKey('acct-quiet', 'run-q')), 'the quiet org\'s timer fired in the first batch');
  assert.deepEqual(fired.slice(0, 2), [orgScopedKey('acct-flood', 'run-0'), orgScopedKey('acct-quiet', 'run-q')], 'one of each org first');
  let rest = 0;
  for (let pass = timers.fireDue(); pass > 0; pass = timers.fireDue()) rest += pass;
  assert.equal(FIRE_BATCH + rest, flood + 1);
  assert.deepEqual(fired.filter((key) => key.startsWith('acct-flood')), Array.from({ length: flood }, (_, i) => orgScopedKey('acct-flood', `run-${i}`)), 'an org\'s own in the order they were due');
  timers.close();
});

test('with more orgs due than a turn fires, the turn goes on where the last one stopped: an org after them is not held back by those first in line', () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  const timers = new RunTimers(clock, (key) => fired.push(key));
  const busy = FIRE_BATCH + 44;
  for (let o = 0; o < busy; o++) for (let i = 0; i < 4; i++) timers.arm(orgScopedKey(`acct-busy-${o}`, `run-${i}`), 1000 + i * 10);
  timers.arm(orgScopedKey('acct-quiet', 'run-q'), 1015);
  clock.advance(2000);
  let turns = 0;
  while (!fired.includes(orgScopedKey('acct-quiet', 'run-q')) && turns < 100) {
    timers.fireDue();
    turns++;
  }
  assert.equal(turns, 2, 'the second turn: after one timer of each busy org, not after every timer of the first 256');
  timers.close();
});

test('a timer whose wall-clock time passes sooner than its sleep (host suspended, clock stepped forward) fires at the next re-check', async () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  const timers = new RunTimers(clock, (key) => fired.push(key), 20);
  timers.arm('in-an-hour', 3_600_000);
  // The wall clock jumps an hour while Node's timers, counting monotonic time, have barely moved.
  clock.advance(3_600_000);
  const deadline = Date.now() + 2000;
  while (fired.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.deepEqual(fired, ['in-an-hour'], 'fired by the timers themselves, without a fireDue() call');
  timers.close();
});

test('a clock set back is told to the owner once, before anything fires; reads a moment apart are not a set back', () => {
  const clock = new ManualClock(10_000_000);
  const told: number[] = [];
  const fired: string[] = [];
  const timers = new RunTimers(clock, (key) => fired.push(key), undefined, () => told.push(clock.now()));
  timers.arm('later', 20_000_000);
  clock.set(9_999_500);
  timers.fireDue();
  assert.deepEqual(told, [], 'half a second back is jitter between reads');
  clock.set(5_000_000);
  timers.fireDue();
  timers.fireDue();
  assert.deepEqual(told, [5_000_000], 'told once, not again at the next look');
  clock.set(30_000_000);
  assert.equal(timers.fireDue(), 1);
  assert.deepEqual(told, [5_000_000], 'going forward is not a set back');
  assert.deepEqual(fired, ['later']);
  timers.close();
});
