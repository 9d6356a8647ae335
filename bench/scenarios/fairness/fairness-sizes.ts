// How hard tenant A floods and how tenant B probes, full and --quick. B's events are paced, the
// same way in both phases, so B's own queue stays short and the difference is A's flood alone.

export interface FairnessSizes {
  /** Runs tenant A enqueues through the events API before B starts. */
  readonly floodRuns: number;
  readonly floodSenders: number;
  readonly probeEvents: number;
  /** B sends one event every this many ms (open loop). */
  readonly probeIntervalMs: number;
  /** After B's last event, how long its runs may take to complete before they count as missing. */
  readonly probeTimeoutMs: number;
  readonly floodTimeoutMs: number;
}

export function fairnessSizes(quick: boolean): FairnessSizes {
  return quick
    ? { floodRuns: 2000, floodSenders: 32, probeEvents: 20, probeIntervalMs: 20, probeTimeoutMs: 20_000, floodTimeoutMs: 60_000 }
    : { floodRuns: 100_000, floodSenders: 64, probeEvents: 100, probeIntervalMs: 20, probeTimeoutMs: 60_000, floodTimeoutMs: 300_000 };
}
