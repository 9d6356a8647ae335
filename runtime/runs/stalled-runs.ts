// Runs whose last transition could not be written (a full disk, a failed commit). The engine
// forgets their in-memory actor and picks each up again from its durable snapshot after a pause
// that doubles with every failure in a row: a queued run queues again, a step attempt that is not
// out any more is sent again under the same fence and idempotency key, a timer is armed again.

import type { Clock } from '../clock.ts';
import { RunTimers } from './run-timers.ts';

/** The first pause after a failed write, doubled per further failure of the same run up to the cap. */
export const FIRST_RETRY_MS = 1000;
export const MAX_RETRY_MS = 60_000;

export class StalledRuns {
  readonly #clock: Clock;
  /** Failed writes in a row, per run key; a run is stalled while it has an entry. */
  readonly #failures = new Map<string, number>();
  readonly #timers: RunTimers;

  constructor(clock: Clock, resume: (key: string) => void) {
    this.#clock = clock;
    this.#timers = new RunTimers(clock, (key) => {
      if (this.#failures.has(key)) resume(key);
    });
  }

  /** The timers resumptions wait on (tests fire them after advancing a manual clock). */
  get timers(): RunTimers {
    return this.#timers;
  }

  /** Runs stalled now. */
  get size(): number {
    return this.#failures.size;
  }

  has(key: string): boolean {
    return this.#failures.has(key);
  }

  /** A write of the run failed: resume it after the pause its failures so far call for. */
  failed(key: string): void {
    const failures = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, failures);
    this.#timers.arm(key, this.#clock.now() + Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (failures - 1)));
  }

  /** A write of the run succeeded, or the run is gone: it is no longer stalled. */
  cleared(key: string): void {
    if (!this.#failures.delete(key)) return;
    this.#timers.disarm(key);
  }

  close(): void {
    this.#timers.close();
  }
}
