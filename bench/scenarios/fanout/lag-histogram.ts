// Delivery-lag histogram of the fan-out workers: 0.1 ms buckets up to 30 s, kept per worker and
// merged in the bench (10^7 samples do not fit in arrays); percentiles are exact to one bucket.

/** 0.1 ms: below the 1 ms resolution of the `at_ms` timestamps it is measured against. */
export const LAG_BUCKET_MS = 0.1;
const BUCKETS = 300_000;

export interface LagHistogram {
  readonly counts: Uint32Array;
  /** Samples above the last bucket (>= 30 s), counted at `maxMs`. */
  overflow: number;
  /** Receipt before the server's timestamp (clock steps, or `at_ms` rounding): counted as 0. */
  negative: number;
  total: number;
  maxMs: number;
}

/** What a worker sends back: only the non-empty buckets, as [index, count] pairs. */
export interface SparseLagHistogram {
  readonly buckets: ReadonlyArray<readonly [number, number]>;
  readonly overflow: number;
  readonly negative: number;
  readonly total: number;
  readonly maxMs: number;
}

export function createLagHistogram(): LagHistogram {
  return { counts: new Uint32Array(BUCKETS), overflow: 0, negative: 0, total: 0, maxMs: 0 };
}

export function recordLag(histogram: LagHistogram, lagMs: number): void {
  histogram.total += 1;
  if (lagMs > histogram.maxMs) histogram.maxMs = lagMs;
  if (lagMs < 0) {
    histogram.negative += 1;
    histogram.counts[0] = (histogram.counts[0] as number) + 1;
    return;
  }
  const index = Math.floor(lagMs / LAG_BUCKET_MS);
  if (index >= BUCKETS) histogram.overflow += 1;
  else histogram.counts[index] = (histogram.counts[index] as number) + 1;
}

export function toSparse(histogram: LagHistogram): SparseLagHistogram {
  const buckets: Array<readonly [number, number]> = [];
  histogram.counts.forEach((count, index) => {
    if (count > 0) buckets.push([index, count]);
  });
  return { buckets, overflow: histogram.overflow, negative: histogram.negative, total: histogram.total, maxMs: histogram.maxMs };
}

export function mergeSparse(parts: readonly SparseLagHistogram[]): SparseLagHistogram {
  const merged = new Map<number, number>();
  for (const part of parts) for (const [index, count] of part.buckets) merged.set(index, (merged.get(index) ?? 0) + count);
  return {
    buckets: [...merged.entries()].sort((a, b) => a[0] - b[0]),
    overflow: parts.reduce((sum, p) => sum + p.overflow, 0),
    negative: parts.reduce((sum, p) => sum + p.negative, 0),
    total: parts.reduce((sum, p) => sum + p.total, 0),
    maxMs: parts.reduce((max, p) => Math.max(max, p.maxMs), 0),
  };
}

/** Nearest-rank percentile, reported as the upper edge of its bucket; undefined without samples. */
export function lagPercentile(histogram: SparseLagHistogram, percent: number): number | undefined {
  if (histogram.total === 0) return undefined;
  const rank = Math.max(1, Math.ceil((percent / 100) * histogram.total));
  let seen = 0;
  for (const [index, count] of histogram.buckets) {
    seen += count;
    if (seen >= rank) return Math.min((index + 1) * LAG_BUCKET_MS, histogram.maxMs);
  }
  return histogram.maxMs;
}
