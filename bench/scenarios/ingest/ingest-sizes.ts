// How much load the ingest scenario offers, full and --quick: request counts, time targets and bounds.
// Counts, not durations, drive each run: every pool is sent exactly once, so each id is unique.

import { availableParallelism } from 'node:os';

export interface IngestSizes {
  readonly connections: number;
  readonly payloadBytes: number;
  /** wrk threads: half the cores, so the server under test keeps the other half. */
  readonly wrkThreads: number;
  /** Closed-loop requests before each measured run (JIT, page cache, connection setup); not reported. */
  readonly warmupRequests: number;
  /** The measured run is sized from the warm-up rate to last about this long... */
  readonly measureSeconds: number;
  /** ...within these bounds. */
  readonly minRequests: number;
  readonly maxRequests: number;
  /** Fractions of the reference peak at which the open-loop latency curve is taken. */
  readonly curveFractions: readonly number[];
  readonly curveSeconds: number;
  readonly curveMinRequests: number;
  readonly lmdbWarmup: number;
  readonly lmdbRecords: number;
}

export function ingestSizes(quick: boolean): IngestSizes {
  const shared = {
    connections: 64,
    payloadBytes: 1024,
    wrkThreads: Math.max(1, Math.floor(availableParallelism() / 2)),
    curveFractions: [0.25, 0.5, 0.75],
  };
  if (quick) {
    return {
      ...shared,
      warmupRequests: 200,
      measureSeconds: 0.5,
      minRequests: 500,
      maxRequests: 3000,
      curveSeconds: 0.5,
      curveMinRequests: 100,
      lmdbWarmup: 200,
      lmdbRecords: 2000,
    };
  }
  return {
    ...shared,
    warmupRequests: 5000,
    measureSeconds: 8,
    minRequests: 20_000,
    maxRequests: 400_000,
    curveSeconds: 5,
    curveMinRequests: 2000,
    lmdbWarmup: 5000,
    lmdbRecords: 200_000,
  };
}

/** The offered rate of a curve point: `fraction` of the reference peak, at least 1/s. */
export const curveRate = (fraction: number, referencePeakPerSec: number): number => Math.max(1, Math.round(fraction * referencePeakPerSec));

/** A rate above this share of a system's own peak is not offered: it would only measure a growing queue. */
const CAPACITY_MARGIN = 0.95;

/** Why a curve point at `ratePerSec` is not offered to a system that peaked at `ownPeakPerSec`; undefined when it is. */
export function overCapacityNote(ratePerSec: number, ownPeakPerSec: number | undefined): string | undefined {
  if (ownPeakPerSec === undefined || ratePerSec <= CAPACITY_MARGIN * ownPeakPerSec) return undefined;
  return `above ${Math.round(CAPACITY_MARGIN * 100)} % of its own peak (${Math.round(ownPeakPerSec)}/s)`;
}

/** Requests (or records) for a curve point: `curveSeconds` at its rate, at least `curveMinRequests`. */
export const curveRequestCount = (sizes: IngestSizes, ratePerSec: number): number => Math.max(sizes.curveMinRequests, Math.round(ratePerSec * sizes.curveSeconds));

/** Requests for a measured run: `measureSeconds` at the warm-up rate, clamped to the bounds. */
export function measuredRequestCount(sizes: IngestSizes, warmupRatePerSec: number): number {
  const wanted = Math.round(warmupRatePerSec * sizes.measureSeconds);
  return Math.min(sizes.maxRequests, Math.max(sizes.minRequests, wanted));
}
