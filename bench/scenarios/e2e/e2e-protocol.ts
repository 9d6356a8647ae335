// What the e2e scenario hands its load worker and what the worker prints back: one JSON spec in argv,
// one JSON line with the end-to-end latencies (request sent -> completion notice received).

/** The BullMQ peer's queue: its ingest adds to it, its worker drains it, the load worker listens to it. */
export const BULLMQ_QUEUE = 'bench-effects';

export interface E2eLoadSpec {
  readonly port: number;
  readonly path: string;
  readonly secret: string;
  readonly payloadBytes: number;
  readonly idPrefix: string;
  readonly warmup: number;
  readonly count: number;
  /** End-to-end runs in flight (closed loop). */
  readonly concurrency: number;
  readonly timeoutMs: number;
  /** How completions are observed: Sluice's live room, or BullMQ's QueueEvents on the peer's Redis. */
  readonly notice:
    | { readonly kind: 'live-room'; readonly orgId: string; readonly apiKey: string }
    | { readonly kind: 'bullmq'; readonly redisPort: number };
}

export interface E2eLoadResult {
  readonly completed: number;
  /** Requests answered 204 (accepted). */
  readonly accepted: number;
  readonly errors: number;
  readonly firstError?: string;
  readonly durationSec: number;
  readonly throughputPerSec: number;
  readonly p50Ms?: number;
  readonly p99Ms?: number;
  /** CPU of the load worker over the measured run, in cores. */
  readonly loadCpuCores: number;
}
