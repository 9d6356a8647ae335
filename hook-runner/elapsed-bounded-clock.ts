// The wall clock bounded by the time that has passed since a start, on the monotonic clock, from
// above for measuring ages and from below for dating records. Shared by the runtime
// (runtime/prune-time.ts) and the hook-runner (pruning-schedule.ts, server.ts).
// - Measuring (capped): a wall clock stepped forward while the process runs (an NTP step, a VM
//   resumed) made records minutes old read as past their retention, and pruned them: the runner's
//   call ledger at a +31-day step, the runtime's dedup claims past the dedup window.
// - Dating (floored): a wall clock set back while the process runs dated what was written by it,
//   and once the clock was put right those records aged early by as much: 31 days back for a minute
//   pruned the runner's calls of that minute at its next pass (a retried call ran its guest again).
// A clock set back is followed at once by the cap, and one stepped forward by the floor (records
// dated ahead are kept longer, never shorter). One wrong when the clock is made cannot be told from
// a long downtime.

/** Answers min(wall now, wall when made + monotonic time since): the time ages are measured against. */
export function wallCappedByElapsed(wallNow: () => number, monotonicNow: () => number): () => number {
  const elapsedWall = wallByElapsed(wallNow, monotonicNow);
  return () => Math.min(wallNow(), elapsedWall());
}

/** Answers max(wall now, wall when made + monotonic time since): the time records are dated by for their age. */
export function wallFlooredByElapsed(wallNow: () => number, monotonicNow: () => number): () => number {
  const elapsedWall = wallByElapsed(wallNow, monotonicNow);
  return () => Math.max(wallNow(), elapsedWall());
}

/** The wall time when made, moved on by the monotonic time since. */
function wallByElapsed(wallNow: () => number, monotonicNow: () => number): () => number {
  const startedWall = wallNow();
  const startedMonotonic = monotonicNow();
  return () => startedWall + (monotonicNow() - startedMonotonic);
}
