// The time ages of stored things are measured against (dedup claims, alive or pruned; history past
// retention, appended rows, deleted workflows): the wall clock, but never further ahead than the
// time passed since the start on the monotonic clock. A wall clock set forward while the runtime
// ran (past the dedup window) pruned claims still live in real time, or took them for expired, and
// the same deliveries were taken again and ran twice; what a prune removes never comes back. A
// clock set back is followed at once, and so is one wrong at the start: nothing here knows better.
// That keeps what was written before a set back longer, but what is written during it is dated by
// it, and ages early by as much once the clock is put right (records are dated by the wall clock).
// The monotonic clock stands still while the host is suspended, so each suspend keeps things longer
// by as much, until the next start; so does a clock behind at the start and stepped forward later
// (a host without a real-time clock).

import { wallCappedByElapsed } from '../hook-runner/elapsed-bounded-clock.ts';
import type { Clock } from './clock.ts';

/** Answers the time to prune by: min(wall now, wall at the start + monotonic time since); a clock without `monotonic` as it is. */
export function pruneTime(clock: Clock): () => number {
  const { monotonic } = clock;
  if (monotonic === undefined) return () => clock.now();
  return wallCappedByElapsed(() => clock.now(), () => monotonic.call(clock));
}
