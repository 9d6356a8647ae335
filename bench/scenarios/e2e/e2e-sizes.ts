// How much load the e2e scenario offers, full and --quick: runs in flight, warm-up and measured runs.
// A closed loop: the number in flight, not a rate, is what the load worker holds constant.

export interface E2eSizes {
  readonly payloadBytes: number;
  /** End-to-end runs in flight (closed loop); also Sluice's max_concurrent_runs and the BullMQ worker concurrency. */
  readonly concurrency: number;
  readonly warmup: number;
  readonly count: number;
  readonly timeoutMs: number;
}

export function e2eSizes(quick: boolean): E2eSizes {
  return quick
    ? { payloadBytes: 1024, concurrency: 64, warmup: 100, count: 500, timeoutMs: 60_000 }
    : { payloadBytes: 1024, concurrency: 128, warmup: 2000, count: 20_000, timeoutMs: 300_000 };
}
