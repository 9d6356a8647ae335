// What the fan-out scenario and its subscriber workers say to each other over the worker's HTTP
// control port: connect a round of sockets, open the measured window, report when every socket is done.

import type { SparseLagHistogram } from './lag-histogram.ts';

/** argv[2] of a subscriber worker. */
export interface SubscriberWorkerSpec {
  /** WebSocket handshakes in flight while a round connects (keeps the server's accept backlog short). */
  readonly connectConcurrency: number;
  /** Every this many frames, one is fully decoded with protobufjs and compared with the scan. */
  readonly checkEvery: number;
}

/** `GET /progress`: the slowest socket of the worker, in run updates received this round. */
export interface WorkerProgress {
  readonly open: number;
  readonly minUpdates: number;
  readonly maxUpdates: number;
}

/** `POST /connect?url=&count=` answers this once every socket of the round is open or failed. */
export interface ConnectResult {
  readonly connected: number;
  readonly failed: number;
  readonly firstError?: string;
}

/** `POST /finish?expected=&timeoutMs=`: answered when every socket has `expected` updates, or at the bound. */
export interface WorkerRoundResult {
  readonly sockets: number;
  /** Sockets closed by the server or by an error during the round, by close code. */
  readonly closedByCode: Readonly<Record<string, number>>;
  /** Run updates received, all sockets together. */
  readonly updates: number;
  /** Of those, updates stamped (`at_ms`) at or after the measured window's start. */
  readonly measuredUpdates: number;
  /** Wall-clock ms (performance.timeOrigin + now) of the first and last measured receipt. */
  readonly firstMeasuredAtMs: number | null;
  readonly lastMeasuredAtMs: number | null;
  /**
   * Updates received once the window opened, whenever they were stamped, and the wall-clock ms of
   * the first and last of them: a system whose sending paused for the whole window (its subscribers
   * behind from the warm-up on) sent no update in it, and is measured by these at its own pace.
   */
  readonly receivedInWindow: number;
  readonly firstWindowReceiptAtMs: number | null;
  readonly lastWindowReceiptAtMs: number | null;
  readonly heartbeats: number;
  readonly bytes: number;
  /** Sockets that received each seq of 1..`expected` exactly once (count and sum of seqs). */
  readonly complete: number;
  /** Updates that arrived after one with a higher seq on the same socket. */
  readonly outOfOrder: number;
  /** Frames that did not scan, and scanned frames the protobufjs decode disagreed with. */
  readonly badFrames: number;
  readonly checkedFrames: number;
  readonly checkMismatches: number;
  readonly lag: SparseLagHistogram;
  /** CPU the worker used from `/start` to the answer, in cores (1 = one full core). */
  readonly cpuCores: number;
}
