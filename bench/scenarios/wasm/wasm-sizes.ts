// How many calls the wasm scenario makes, full and --quick. Counts, not durations: every series is
// bounded, and each worker process has a time bound derived from its counts.

export interface WasmSizes {
  readonly warmup: number;
  /** Sequential calls per module in-process (addon, Node). */
  readonly samples: number;
  readonly concurrentSamples: number;
  /** Calls in flight for the throughput series (addon and gRPC). */
  readonly concurrency: number;
  readonly grpcWarmup: number;
  readonly grpcSamples: number;
  readonly grpcConcurrentSamples: number;
  readonly loopSamples: number;
}

export function wasmSizes(quick: boolean): WasmSizes {
  if (quick) {
    return { warmup: 30, samples: 300, concurrentSamples: 300, concurrency: 16, grpcWarmup: 20, grpcSamples: 150, grpcConcurrentSamples: 300, loopSamples: 2 };
  }
  return {
    warmup: 2000,
    samples: 20_000,
    concurrentSamples: 20_000,
    concurrency: 16,
    grpcWarmup: 500,
    grpcSamples: 5000,
    grpcConcurrentSamples: 10_000,
    loopSamples: 10,
  };
}

/** A generous bound for a worker: start-up plus 5 ms per call (these calls take microseconds to a millisecond). */
export function workerTimeoutMs(calls: number): number {
  return 60_000 + calls * 5;
}
