// What the devices scenario hands its load worker and what the worker prints back: one JSON spec in
// argv, one JSON line with the ack latencies (frame sent -> its ack received) and the answer counts.

import type { TimedSeries } from '../../harness/stats.ts';

/** The event type every bench message carries (no workflow listens to it). */
export const DEVICE_MESSAGE_TYPE = 'bench.reading';

/** One socket to open: `ws://host:port` + `path`, the token offered next to the `sluice-device` subprotocol. */
export interface DeviceSocketSpec {
  readonly path: string;
  readonly token: string;
}

export interface DeviceLoadSpec {
  readonly port: number;
  readonly sockets: readonly DeviceSocketSpec[];
  readonly inFlightPerSocket: number;
  readonly payloadBytes: number;
  /** Makes message ids unique across systems and runs (each device dedups by id). */
  readonly idPrefix: string;
  readonly warmup: number;
  readonly count: number;
  readonly timeoutMs: number;
}

export interface DeviceLoadResult extends TimedSeries {
  /** Measured messages answered (ack or nack). */
  readonly completed: number;
  /** Of those, acked as newly stored (`"duplicate":false`). */
  readonly accepted: number;
  /** Acked as duplicates: never expected here, every id is new. */
  readonly duplicates: number;
  readonly nacks: number;
  readonly firstError?: string;
  /** Messages acked in the warm-up (not reported as numbers; checked against what the server stored). */
  readonly warmupAcked: number;
  /** CPU of the load worker over the measured phase, in cores. */
  readonly loadCpuCores: number;
}
