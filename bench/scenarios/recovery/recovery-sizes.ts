// How many runs the recovery scenario puts in flight before the kill, full and --quick.
// max_concurrent_runs is at most 1,000 per org, so 10,000 runs in flight take ten orgs.

export interface RecoverySizes {
  readonly orgs: number;
  /** Runs per org, all admitted at once (max_concurrent_runs = this). */
  readonly runsPerOrg: number;
  /** Event requests in flight while filling. */
  readonly senders: number;
  /** Bound on filling (all runs waiting on the receiver) and on recovery. */
  readonly fillTimeoutMs: number;
  readonly recoverTimeoutMs: number;
  /** After the last completion, how long to keep listening for late (duplicate) deliveries. */
  readonly settleMs: number;
  /**
   * The BullMQ peer's lockDuration and stalledInterval: how soon the jobs of a worker that died go
   * back to waiting. BullMQ's defaults (30 s each) in full runs, what a user gets; shorter in --quick,
   * which only keeps the harness working (long enough that a loaded machine's pause does not make a
   * live job look stalled, which would send its webhook twice).
   */
  readonly bullmqLockMs: number;
  readonly bullmqStalledMs: number;
}

export function recoverySizes(quick: boolean): RecoverySizes {
  return quick
    ? { orgs: 2, runsPerOrg: 100, senders: 32, fillTimeoutMs: 30_000, recoverTimeoutMs: 30_000, settleMs: 300, bullmqLockMs: 5_000, bullmqStalledMs: 2_000 }
    : { orgs: 10, runsPerOrg: 1000, senders: 64, fillTimeoutMs: 120_000, recoverTimeoutMs: 120_000, settleMs: 2000, bullmqLockMs: 30_000, bullmqStalledMs: 30_000 };
}

/** The target is for 10,000 runs; smaller runs are reported but not judged. */
export const TARGET_RUNS = 10_000;
export const TARGET_SECONDS = 10;
