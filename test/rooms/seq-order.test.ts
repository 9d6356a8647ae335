// The seq order on its own: updates come out in seq order, a gap is skipped after its grace, and
// `skippedBetween` and `isSkipped` hold a skipped seq (which may still arrive late) until it arrives or is
// forgotten, so the memory of gaps stays bounded; a passed-over seq (a sandbox reset's mark) is no gap.

import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import { GAP_GRACE_MS, SeqOrder, SKIPPED_MEMORY_MS } from '../../runtime/rooms/seq-order.ts';

const update = (seq: number): RunUpdate =>
  ({ seq, org_id: 'org', run_id: `run-${seq}`, state: 'running', channel: '', workflow_id: 'wf', event_id: 'evt', step_id: 's', attempt: 1, at_ms: 1, error: '', environment: 'production' }) as RunUpdate;

test('a skipped gap counts as skipped until it arrives late; a gap never filled is forgotten after a while', () => {
  const emitted: number[] = [];
  const order = new SeqOrder(() => 1, (_org, u) => emitted.push(u.seq));
  const skipped = (after: number, upTo: number, nowMs?: number) => [...order.skippedBetween('org', after, upTo, nowMs)];
  order.offer('org', [update(1), update(3), update(4)]);
  assert.deepEqual(emitted, [1], '3 and 4 wait for 2');
  assert.deepEqual([order.emitted('org'), skipped(0, 4)], [1, []]);
  order.releaseGaps();
  assert.deepEqual(emitted, [1, 3, 4]);
  assert.deepEqual([order.emitted('org'), skipped(0, 4)], [4, [2]], '2 may still come');
  assert.deepEqual(skipped(2, 4), [], 'only within the range asked');
  order.offer('org', [update(2)]);
  assert.deepEqual(emitted, [1, 3, 4, 2], 'late, at once');
  assert.deepEqual(skipped(0, 4), []);

  order.offer('org', [update(6)]);
  order.releaseGaps();
  assert.deepEqual(skipped(0, 6), [5], '5 was skipped');
  assert.deepEqual(skipped(0, 6, Date.now() + SKIPPED_MEMORY_MS + 1), [], 'and forgotten after SKIPPED_MEMORY_MS');
  order.close();
});

test("forget lets go of an org's queue and the gap it waits on: nothing of the org comes out after it", () => {
  const emitted: number[] = [];
  const order = new SeqOrder(() => 1, (_org, u) => emitted.push(u.seq));
  order.offer('org', [update(1), update(3)]);
  assert.deepEqual([emitted, order.emitted('org')], [[1], 1], '3 waits for 2');
  order.forget('org');
  order.releaseGaps();
  assert.deepEqual([emitted, order.emitted('org')], [[1], 0], '3 went with its queue');
  order.close();
});

test('a skipped seq counts as skipped until it arrives or SKIPPED_MEMORY_MS passes; later gaps forget older ones', () => {
  mock.timers.enable({ apis: ['Date', 'setTimeout'], now: 1_000_000 });
  try {
    const order = new SeqOrder(() => 1, () => undefined);
    order.offer('org', [update(1), update(3)]);
    order.releaseGaps();
    assert.equal(order.isSkipped('org', 2), true);
    assert.equal(order.isSkipped('org', 2, Date.now() + SKIPPED_MEMORY_MS + 1), false, 'forgotten: a replay no longer waits for it');
    assert.equal(order.isSkipped('org', 2), false, 'and gone for good');

    order.offer('org', [update(5)]);
    order.releaseGaps();
    mock.timers.tick(SKIPPED_MEMORY_MS + 1);
    order.offer('org', [update(7)]);
    order.releaseGaps();
    // Skipping 6 forgot 4, with no skippedBetween() call in between: the map does not grow per gap. (Asked
    // as of the time 4 was skipped, 4 would still count, had it been kept.)
    assert.equal(order.isSkipped('org', 4, 1_000_000), false, 'skipping 6 forgot 4');
    assert.equal(order.isSkipped('org', 6), true);
    order.close();
  } finally {
    mock.timers.reset();
  }
});

test('a passed-over seq (a reset mark) counts as emitted in its turn, sends nothing, and is no gap', () => {
  const emitted: number[] = [];
  const order = new SeqOrder(() => 1, (_org, u) => emitted.push(u.seq));
  order.offer('org', [update(1), update(3)]);
  assert.deepEqual(emitted, [1], '3 waits for 2');
  order.passOver('org', 2);
  assert.deepEqual(emitted, [1, 3], 'released at once, not after a grace period');
  assert.equal(order.emitted('org'), 3);
  assert.deepEqual([...order.skippedBetween('org', 0, 3)], [], 'nothing skipped');
  order.passOver('org', 4);
  assert.equal(order.emitted('org'), 4, 'a mark with nothing pending moves the position too');
  order.passOver('org', 2);
  assert.equal(order.emitted('org'), 4, 'an old mark changes nothing');
  order.close();
});

test('a gap is skipped GAP_GRACE_MS after it was first missed, even while later updates keep arriving', () => {
  mock.timers.enable({ apis: ['Date', 'setTimeout'], now: 1_000_000 });
  try {
    const emitted: number[] = [];
    const order = new SeqOrder(() => 1, (_org, u) => emitted.push(u.seq));
    order.offer('org', [update(1), update(3)]);
    // An update every 100 ms: before, each offer restarted the grace, so 2's gap held back every later one.
    let seq = 4;
    for (let elapsed = 100; elapsed < GAP_GRACE_MS; elapsed += 100) {
      mock.timers.tick(100);
      order.offer('org', [update(seq++)]);
    }
    assert.deepEqual(emitted, [1], 'within the grace, 3 and later wait for 2');
    mock.timers.tick(100);
    assert.deepEqual(emitted, [1, 3, 4, 5, 6, 7], 'the grace of 2 is over: the rest follows in order');
    order.offer('org', [update(9)]);
    mock.timers.tick(GAP_GRACE_MS - 1);
    order.offer('org', [update(10)]);
    assert.deepEqual(emitted.slice(6), [], 'a new gap (8) gets its own full grace');
    mock.timers.tick(1);
    assert.deepEqual(emitted.slice(6), [9, 10]);
    order.close();
  } finally {
    mock.timers.reset();
  }
});
