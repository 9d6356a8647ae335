// Latency percentiles for the bench's own measurements (Node load generator, LMDB loop):
// exact nearest-rank percentiles over every sample, no histogram approximation.

export interface LatencySummary {
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** A measured series: how long it ran, its rate, and its percentiles when it has samples. */
export interface TimedSeries extends Partial<LatencySummary> {
  readonly durationSec: number;
  readonly throughputPerSec: number;
}

/** Summarises the first `count` samples (milliseconds); `undefined` when there are none. Sorts in place. */
export function summarizeLatencies(samples: Float64Array, count: number): LatencySummary | undefined {
  if (count <= 0) return undefined;
  const sorted = samples.subarray(0, count).sort();
  return {
    p50Ms: percentileOfSorted(sorted, 50),
    p90Ms: percentileOfSorted(sorted, 90),
    p99Ms: percentileOfSorted(sorted, 99),
    maxMs: sorted[sorted.length - 1] ?? 0,
  };
}

/** Nearest-rank percentile of an ascending array. */
export function percentileOfSorted(sorted: Float64Array, percent: number): number {
  const rank = Math.ceil((percent / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? 0;
}

/** Rounds for reports: keeps 3 significant decimals on small numbers, none on large ones. */
export function roundForReport(value: number): number {
  if (Math.abs(value) >= 100) return Math.round(value);
  return Math.round(value * 1000) / 1000;
}
