// The seq order on its own: updates come out in seq order, a gap is skipped after its grace, and
// `settled` stays below a skipped seq (which may still arrive late) until it arrives or is forgotten.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import { SeqOrder, SKIPPED_MEMORY_MS } from '../../runtime/rooms/seq-order.ts';

const update = (seq: number): RunUpdate =>
  ({ seq, org_id: 'org', run_id: `run-${seq}`, state: 'running', channel: '', workflow_id: 'wf', event_id: 'evt', step_id: 's', attempt: 1, at_ms: 1, error: '', environment: 'production' }) as RunUpdate;

test('a skipped gap keeps settled below it until it arrives late; a gap never filled is forgotten after a while', () => {
  const emitted: number[] = [];
  const order = new SeqOrder(() => 1, (_org, u) => emitted.push(u.seq));
  order.offer('org', [update(1), update(3), update(4)]);
  assert.deepEqual(emitted, [1], '3 and 4 wait for 2');
  assert.deepEqual([order.emitted('org'), order.settled('org')], [1, 1]);
  order.releaseGaps();
  assert.deepEqual(emitted, [1, 3, 4]);
  assert.deepEqual([order.emitted('org'), order.settled('org')], [4, 1], '2 may still come');
  order.offer('org', [update(2)]);
  assert.deepEqual(emitted, [1, 3, 4, 2], 'late, at once');
  assert.equal(order.settled('org'), 4);

  order.offer('org', [update(6)]);
  order.releaseGaps();
  assert.equal(order.settled('org'), 4, '5 was skipped');
  assert.equal(order.settled('org', Date.now() + SKIPPED_MEMORY_MS + 1), 6, 'and forgotten after SKIPPED_MEMORY_MS');
  order.close();
});
