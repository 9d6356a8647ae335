// A wall clock never further ahead than the time that has passed since it was made, on the
// monotonic clock: what retention ages are measured against. A wall clock stepped forward while
// the process runs (an NTP step, a VM resumed) otherwise made records minutes old read as past
// their retention, and pruned them: the runner's call ledger at a +31-day step, the runtime's dedup
// claims past the dedup window. A clock set back is followed at once (what was written before is
// kept longer; what is written during it is dated by it, and ages early by as much once the clock
// is put right); one wrong when this is made cannot be told from a long downtime. Shared by the
// runtime (runtime/prune-time.ts) and the hook-runner (pruning-schedule.ts).

/** Answers min(wall now, wall when made + monotonic time since). */
export function wallCappedByElapsed(wallNow: () => number, monotonicNow: () => number): () => number {
  const startedWall = wallNow();
  const startedMonotonic = monotonicNow();
  return () => Math.min(wallNow(), startedWall + (monotonicNow() - startedMonotonic));
}
