// Which attempts out never sent their effect (what a clean stop records, boot-record.ts): one whose
// effect is going out no longer counts, and neither does one sent again under the fence of an
// attempt of its run that went out in this process (a run picked up again after a stall).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PersistedRun } from '../../actors/run-transition.ts';
import { AttemptsOut } from '../../runtime/runs/attempts-out.ts';

/** The part of a durable snapshot AttemptsOut reads: the run's state and the fence of its attempt. */
const snapshot = (value: string, fence: number): PersistedRun => ({ value, context: { fence } }) as unknown as PersistedRun;

/** An attempt of the run `key` under `fence` that went out and reported. */
function wentOutAndReported(out: AttemptsOut, key: string, fence: number): void {
  const attempt = out.start(key, fence);
  attempt.goingOut();
  out.finish(key, attempt);
}

test('an attempt out counts as never sent until its effect goes out', () => {
  const out = new AttemptsOut();
  const a = out.start('org\u0000run_a', 1);
  out.start('org\u0000run_b', 4);
  assert.deepEqual(out.neverSent(), [['org\u0000run_a', 1], ['org\u0000run_b', 4]]);
  a.goingOut();
  assert.deepEqual(out.neverSent(), [['org\u0000run_b', 4]]);
  out.finish('org\u0000run_a', a);
  assert.deepEqual(out.neverSent(), [['org\u0000run_b', 4]]);
});

test('an attempt sent again under the fence of one that went out may have gone out, until the run moves on from that fence', () => {
  const out = new AttemptsOut();
  const key = 'org\u0000run_a';
  wentOutAndReported(out, key, 2);
  // Its report was not written (a stall): the run is picked up again still waiting under fence 2.
  out.withdrawIfLeft(key, snapshot('running', 2));
  const again = out.start(key, 2);
  assert.deepEqual(out.neverSent(), [], 'the first one went out');
  out.finish(key, again);
  // The run moved on to its next attempt: a new fence never went out.
  out.withdrawIfLeft(key, snapshot('running', 3));
  out.start(key, 3);
  assert.deepEqual(out.neverSent(), [[key, 3]]);
});

test('a run that left its fence (finished, deleted) forgets it went out; an attempt it left does not note it', () => {
  const out = new AttemptsOut();
  const key = 'org\u0000run_a';
  wentOutAndReported(out, key, 5);
  out.withdrawIfLeft(key, snapshot('completed', 5));
  out.start(key, 5);
  assert.deepEqual(out.neverSent(), [[key, 5]], 'forgotten once the run completed');

  const other = 'org\u0000run_b';
  const left = out.start(other, 1);
  out.start(other, 2);
  left.goingOut();
  assert.deepEqual(out.neverSent(), [[key, 5], [other, 2]], 'a replaced attempt going out says nothing of the new one');
  out.withdrawIfLeft(other, snapshot('running', 2));
  const later = out.start(other, 1);
  assert.ok(out.neverSent().some(([k, fence]) => k === other && fence === 1), 'nor of its own fence, once replaced');
  out.finish(other, later);
});

test('deleting an org forgets what its runs sent', () => {
  const out = new AttemptsOut();
  const key = 'org\u0000run_a';
  wentOutAndReported(out, key, 1);
  out.withdrawOrg('org');
  out.start(key, 1);
  assert.deepEqual(out.neverSent(), [[key, 1]]);
});

test('once sealed at a stop, an attempt counted as never sent may not go out; one already out still may', () => {
  const out = new AttemptsOut();
  const sent = out.start('org\u0000run_a', 1);
  assert.equal(sent.goingOut(), true);
  const waiting = out.start('org\u0000run_b', 2);
  assert.deepEqual(out.sealUnsent(), [['org\u0000run_b', 2]]);
  assert.equal(waiting.goingOut(), false, 'counted as never sent: it stays so');
  assert.deepEqual(out.neverSent(), [['org\u0000run_b', 2]]);
  assert.equal(sent.goingOut(), true);
});

test('an attempt its run left (withdrawn) that still goes out notes nothing for the run', () => {
  const out = new AttemptsOut();
  const key = 'org\u0000run_a';
  const attempt = out.start(key, 3);
  out.withdrawIfLeft(key, snapshot('cancelled', 3));
  assert.equal(attempt.goingOut(), true);
  out.finish(key, attempt);
  out.start(key, 3);
  assert.deepEqual(out.neverSent(), [[key, 3]], 'nothing was kept for the cancelled run');
});
