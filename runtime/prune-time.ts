// The time the prunes measure ages against (dedup claims, history past retention, appended rows,
// deleted workflows): the wall clock, but never further ahead than the time passed since the start
// on the monotonic clock. A wall clock set forward while the runtime ran (past the dedup window)
// pruned claims still live in real time, and once the clock came back the same deliveries were
// taken again and ran twice; what a prune removes never comes back. A clock set back is followed at
// once (that only keeps things longer), and so is one wrong at the start: nothing here knows better.

import type { Clock } from './clock.ts';

/** Answers the time to prune by: min(wall now, wall at the start + monotonic time since). */
export function pruneTime(clock: Clock): () => number {
  const { monotonic } = clock;
  if (monotonic === undefined) return () => clock.now();
  const startedWall = clock.now();
  const startedMonotonic = monotonic.call(clock);
  return () => Math.min(clock.now(), startedWall + (monotonic.call(clock) - startedMonotonic));
}
