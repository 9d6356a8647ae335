// How many subscribers the fan-out scenario connects and how fast runs complete, full and --quick.
// The run rate is chosen per size so the offered deliveries (updates x subscribers) sit above the target.

export interface FanoutSize {
  readonly subscribers: number;
  /** Runs started per second (open loop); each makes 3 live updates: queued, delaying, completed. */
  readonly runsPerSec: number;
}

export interface FanoutSizes {
  readonly sizes: readonly FanoutSize[];
  readonly warmupSec: number;
  /** Sending lasts warm-up + measure seconds, pauses included; the last runs then drain. */
  readonly measureSec: number;
  /** The workflow's one step: a durable delay of this many ms (no receiver to share the bench's CPU). */
  readonly delayMs: number;
  /** Sending pauses while the slowest subscriber is more than this many seconds of updates behind. */
  readonly maxBacklogSec: number;
  /** After the last run, how long every subscriber may take to receive every update. */
  readonly drainTimeoutMs: number;
  readonly workers: number;
  /**
   * Lag at lower rates, at the largest size: fractions of Sluice's deliveries/s there (the rows above
   * saturate this machine's cores, so their lag is mostly waiting for CPU).
   */
  readonly curveFractions: readonly number[];
}

/** 3 updates per run: queued (at ingest), delaying (admitted), completed (timer fired). */
export const UPDATES_PER_RUN = 3;
export const TARGET_DELIVERIES_PER_SEC = 1_000_000;
export const TARGET_SUBSCRIBERS = 10_000;

export function fanoutSizes(quick: boolean, cores: number): FanoutSizes {
  // At least two subscriber processes, so the clients are never one saturated event loop.
  const workers = Math.max(2, Math.min(4, cores));
  return quick
    ? { sizes: [{ subscribers: 50, runsPerSec: 100 }, { subscribers: 200, runsPerSec: 50 }], warmupSec: 0.3, measureSec: 1, delayMs: 5, maxBacklogSec: 1, drainTimeoutMs: 15_000, workers, curveFractions: [0.5] }
    : {
        // 1.5 M deliveries/s offered at both sizes, 50 % above the target: the rows show what each
        // system sustains (pausing when behind), not the offered rate.
        sizes: [{ subscribers: 1000, runsPerSec: 500 }, { subscribers: TARGET_SUBSCRIBERS, runsPerSec: 50 }],
        warmupSec: 2,
        measureSec: 10,
        delayMs: 5,
        maxBacklogSec: 1,
        drainTimeoutMs: 60_000,
        workers,
        curveFractions: [0.05, 0.25],
      };
}
