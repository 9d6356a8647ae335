// Retry timers carry a jitter (actors/retry-policy.ts): tests check a due time against its
// schedule's window instead of an exact instant.

import assert from 'node:assert/strict';
import { RETRY_JITTER } from '../../actors/retry-policy.ts';

/**
 * Asserts that a retry is due `scheduledMs` after `from`, less its jitter (at most RETRY_JITTER
 * of the wait, never more than the schedule), and returns when it is due.
 */
export function assertRetryDue(dueAt: number | null | undefined, from: number, scheduledMs: number): number {
  assert.equal(typeof dueAt, 'number', `no retry is due (${dueAt})`);
  const at = dueAt as number;
  const earliest = from + Math.floor(scheduledMs * (1 - RETRY_JITTER));
  assert.ok(at >= earliest && at <= from + scheduledMs, `retry due ${at - from} ms after ${from}, expected ${scheduledMs} ms less at most ${RETRY_JITTER * 100} %`);
  return at;
}
