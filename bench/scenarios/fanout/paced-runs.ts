// The open-loop schedule both fan-out systems get: runs started at a fixed rate for a fixed time, with one
// guard — a pause while the slowest subscriber is too far behind — so an overloaded system queues seconds, not gigabytes.

import { performance } from 'node:perf_hooks';
import { UPDATES_PER_RUN } from './fanout-sizes.ts';
import type { SubscriberPool } from './subscriber-pool.ts';

/** What the schedule drives: Sluice (events through its API) or the peer (frames to its driver socket). */
export interface RunSource {
  /** Starts run `index` without waiting for it. */
  startRun(index: number): void;
}

export interface PacedSchedule {
  readonly runsPerSec: number;
  readonly warmupSec: number;
  readonly measureSec: number;
  /**
   * Pause while the updates offered (UPDATES_PER_RUN per run started, the same count for both
   * systems) minus the slowest subscriber's exceed this; resume below half of it.
   */
  readonly maxBacklogUpdates: number;
  /** One pause longer than this means the subscribers stopped receiving: the round fails. */
  readonly maxPauseMs: number;
}

export interface PacedOutcome {
  /** Runs started: rate x time, less what pauses cost (the schedule ends on time, not on count). */
  readonly runs: number;
  /** Of those, runs started once the measured window had opened (none: sending paused for all of it). */
  readonly runsInWindow: number;
  /** Wall clock (ms) from which updates count as measured: after the warm-up runs. */
  readonly windowStartMs: number;
  readonly sendSec: number;
  readonly pauses: number;
  readonly pausedSec: number;
}

const PROGRESS_POLL_MS = 100;

export async function runPaced(pool: SubscriberPool, source: RunSource, schedule: PacedSchedule): Promise<PacedOutcome> {
  const windowStartMs = Date.now() + 100 + schedule.warmupSec * 1000;
  await pool.start(windowStartMs);
  const sendStartWall = windowStartMs - schedule.warmupSec * 1000;
  if (sendStartWall > Date.now()) await sleep(sendStartWall - Date.now());
  const total = Math.round(schedule.runsPerSec * (schedule.warmupSec + schedule.measureSec));
  const endWall = sendStartWall + (schedule.warmupSec + schedule.measureSec) * 1000;
  let paused = false;
  let pauses = 0;
  let pausedMs = 0;
  let polling = false;
  let pollError: unknown;
  /** Runs started so far, and of them in the measured window. */
  let i = 0;
  let inWindow = 0;
  const poll = setInterval(() => {
    if (polling) return;
    polling = true;
    pool
      .progress()
      .then((p) => {
        const behind = i * UPDATES_PER_RUN - p.minUpdates;
        if (!paused && behind > schedule.maxBacklogUpdates) {
          paused = true;
          pauses += 1;
        } else if (paused && behind <= schedule.maxBacklogUpdates / 2) paused = false;
      })
      .catch((error: unknown) => (pollError = error))
      .finally(() => (polling = false));
  }, PROGRESS_POLL_MS);
  const started = performance.now();
  try {
    let base = started;
    let baseIndex = 0;
    while (i < total && Date.now() < endWall) {
      if (pollError !== undefined) throw pollError;
      if (paused) {
        const pausedAt = performance.now();
        while (paused && pollError === undefined && Date.now() < endWall) {
          if (performance.now() - pausedAt > schedule.maxPauseMs) throw new Error(`subscribers stayed more than ${schedule.maxBacklogUpdates} updates behind for ${schedule.maxPauseMs} ms`);
          await sleep(5);
        }
        pausedMs += performance.now() - pausedAt;
        // Resume at the rate, not with a burst that makes up for the pause.
        base = performance.now();
        baseIndex = i;
        continue;
      }
      const wait = base + ((i - baseIndex) * 1000) / schedule.runsPerSec - performance.now();
      if (wait > 0) {
        await sleep(wait);
        continue;
      }
      source.startRun(i);
      i += 1;
      if (Date.now() >= windowStartMs) inWindow += 1;
    }
  } finally {
    clearInterval(poll);
  }
  return { runs: i, runsInWindow: inWindow, windowStartMs, sendSec: (performance.now() - started) / 1000, pauses, pausedSec: pausedMs / 1000 };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
