// The clocks the ages of stored things are reckoned on, from the wall clock and the monotonic time
// since the start (hook-runner/elapsed-bounded-clock.ts).
// - Measured against (dedup claims, alive or pruned; history past retention, appended rows, deleted
//   workflows): never further ahead than the start plus the time passed. A wall clock set forward
//   while the runtime ran (past the dedup window) pruned claims still live in real time, or took
//   them for expired, and the same deliveries were taken again and ran twice; what a prune removes
//   never comes back. A clock set back is followed at once, and so is one wrong at the start.
// - Dated by (dedup claims): never behind the start plus the time passed. A claim written while the
//   wall clock was set back past the window, dated by it, expired once the clock was put right, and
//   the same device message or webhook delivery was taken again. History, rows and workflows are still
//   dated by the wall clock (the times users read): what is written during a set back ages early by
//   as much once the clock is put right.
// The monotonic clock stands still while the host is suspended, so each suspend keeps things longer
// by as much, until the next start; so does a clock behind at the start and stepped forward later
// (a host without a real-time clock).

import { wallCappedByElapsed, wallFlooredByElapsed } from '../hook-runner/elapsed-bounded-clock.ts';
import type { Clock } from './clock.ts';

/** Answers the time to prune by: min(wall now, wall at the start + monotonic time since); a clock without `monotonic` as it is. */
export const pruneTime = (clock: Clock): (() => number) => boundedByElapsed(clock, wallCappedByElapsed);

/** Answers the time to date a dedup claim by: max(wall now, wall at the start + monotonic time since); a clock without `monotonic` as it is. */
export const claimDatingTime = (clock: Clock): (() => number) => boundedByElapsed(clock, wallFlooredByElapsed);

function boundedByElapsed(clock: Clock, bound: typeof wallCappedByElapsed): () => number {
  const { monotonic } = clock;
  if (monotonic === undefined) return () => clock.now();
  return bound(() => clock.now(), () => monotonic.call(clock));
}
