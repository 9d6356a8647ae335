// What a load generator run reports, whichever generator ran it (wrk or the Node one),
// and what it is asked to do: a bounded number of pre-signed requests at full speed or at a fixed rate.

import type { TimedSeries } from '../harness/stats.ts';

export type GeneratorName = 'wrk' | 'node-closed-loop' | 'node-open-loop';

export interface LoadSpec {
  readonly port: number;
  readonly path: string;
  readonly poolFile: string;
  /** Requests to send; the run ends when each was answered or failed, or at `timeoutMs`. */
  readonly count: number;
  readonly connections: number;
  /** Requests per second on a fixed schedule (open loop); absent means as fast as answers come back. */
  readonly ratePerSec?: number;
  readonly timeoutMs: number;
}

export interface LoadResult extends TimedSeries {
  readonly generator: GeneratorName;
  readonly completed: number;
  readonly statuses: Readonly<Record<string, number>>;
  /** Connection, read or write errors, and requests that were never answered before the bound. */
  readonly socketErrors: number;
  readonly timedOut: number;
}

/** Answers with status `status`, 0 when absent. */
export function countOf(result: LoadResult, status: number): number {
  return result.statuses[String(status)] ?? 0;
}
