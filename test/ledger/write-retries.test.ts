// Keys whose write failed are tried again after a pause that doubles per failure in a row; a wall
// clock set back while they wait starts their pauses again from the new time.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { FIRST_RETRY_MS, MAX_RETRY_MS, WriteRetries } from '../../runtime/ledger/write-retries.ts';

test("a failed key is retried after its pause, twice as long after a second failure; an hour's set back does not hold it for the hour", () => {
  const clock = new ManualClock(Date.UTC(2026, 11, 6, 4, 0, 0));
  const retried: string[] = [];
  const retries = new WriteRetries(clock, (key) => retried.push(key));
  try {
    retries.failed('run-a');
    clock.advance(FIRST_RETRY_MS - 1);
    retries.timers.fireDue();
    assert.deepEqual(retried, []);
    clock.advance(1);
    retries.timers.fireDue();
    assert.deepEqual(retried, ['run-a']);
    retries.failed('run-a');
    assert.equal(retries.timers.dueAt('run-a'), clock.now() + 2 * FIRST_RETRY_MS);

    clock.advance(-3_600_000);
    retries.timers.fireDue();
    assert.equal(retries.timers.dueAt('run-a'), clock.now() + 2 * FIRST_RETRY_MS, 'its pause starts again from the new time');
    clock.advance(2 * FIRST_RETRY_MS);
    retries.timers.fireDue();
    assert.deepEqual(retried, ['run-a', 'run-a']);
  } finally {
    retries.close();
  }
});

test('a key picked up again after its pause that fails again before any write succeeds goes on doubling; a write that succeeds starts the count again', () => {
  const clock = new ManualClock(Date.UTC(2026, 11, 6, 4, 0, 0));
  const retries = new WriteRetries(clock, () => undefined);
  const pauseAfterFailure = (): number => retries.timers.dueAt('run-a')! - clock.now();
  try {
    retries.failed('run-a');
    assert.equal(pauseAfterFailure(), FIRST_RETRY_MS);
    // Picked up (a delay's timer armed again, due at once), and its write fails again.
    retries.resumed('run-a');
    assert.deepEqual([retries.size, retries.has('run-a')], [0, false], 'not counted as stalled meanwhile');
    retries.failed('run-a');
    assert.equal(pauseAfterFailure(), 2 * FIRST_RETRY_MS);
    retries.resumed('run-a');
    retries.failed('run-a');
    assert.equal(pauseAfterFailure(), 4 * FIRST_RETRY_MS);
    retries.resumed('run-a');
    retries.cleared('run-a');
    retries.failed('run-a');
    assert.equal(pauseAfterFailure(), FIRST_RETRY_MS, 'a write went through in between: a new row of failures');
    // Picked up, then failing only after more than MAX_RETRY_MS: its row is over (the pick-up is not kept for ever).
    retries.resumed('run-a');
    clock.advance(MAX_RETRY_MS + 1);
    retries.failed('run-a');
    assert.equal(pauseAfterFailure(), FIRST_RETRY_MS);
    assert.equal(retries.timers.dueAt('run-b'), undefined);
    retries.resumed('run-b');
    retries.failed('run-b');
    assert.equal(retries.timers.dueAt('run-b')! - clock.now(), FIRST_RETRY_MS, 'resumed without having failed: nothing to go on from');
  } finally {
    retries.close();
  }
});
