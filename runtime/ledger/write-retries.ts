// Keys whose write failed (a full disk, a failed commit), each tried again after a pause that
// doubles with every failure in a row, up to a minute. The pauses run on timers of the injected
// clock (tests fire them with `timers.fireDue()` after advancing it); a clock set back starts each
// waiting key's pause again from the new time (else an hour back held the retries for the hour).
// Stalled runs (runs/stalled-runs.ts) and device endings that could not be written
// (triggers/device-sockets.ts) wait on one each.

import type { Clock } from '../clock.ts';
import { growthSweep } from '../growth-sweep.ts';
import { RunTimers } from '../runs/run-timers.ts';

/** The first pause after a failed write, doubled per further failure of the same key up to the cap. */
export const FIRST_RETRY_MS = 1000;
export const MAX_RETRY_MS = 60_000;

export class WriteRetries {
  readonly #clock: Clock;
  /** Failed writes in a row, per key; a key waits while it has an entry. */
  readonly #failures = new Map<string, number>();
  /**
   * Keys picked up again after their pause (`resumed`) in the last MAX_RETRY_MS: the failures in a
   * row they had and when, so that one failing again goes on doubling instead of starting at a
   * second. Kept that long only: a run picked up may never write again (it had finished; it was let go).
   */
  readonly #resumed = new Map<string, { readonly failures: number; readonly at: number }>();
  /** Lets go of the resumed keys no longer recent, as the map grows. */
  readonly #sweepResumed = growthSweep(this.#resumed);
  readonly #timers: RunTimers;

  /** `retry(key)` is called once a failed key's pause is over. */
  constructor(clock: Clock, retry: (key: string) => void) {
    this.#clock = clock;
    this.#timers = new RunTimers(
      clock,
      (key) => {
        if (this.#failures.has(key)) retry(key);
      },
      undefined,
      () => {
        for (const [key, failures] of this.#failures) this.#arm(key, failures);
      },
    );
  }

  /** The timers the retries wait on (tests fire them after advancing a manual clock). */
  get timers(): RunTimers {
    return this.#timers;
  }

  /** Keys waiting now. */
  get size(): number {
    return this.#failures.size;
  }

  has(key: string): boolean {
    return this.#failures.has(key);
  }

  /** A write for the key failed: try it again after the pause its failures so far call for. */
  failed(key: string): void {
    const failures = (this.#failures.get(key) ?? this.#recentlyResumed(key) ?? 0) + 1;
    this.#resumed.delete(key);
    this.#failures.set(key, failures);
    this.#arm(key, failures);
  }

  /** Arms the key's pause from now: the one `failures` in a row call for. */
  #arm(key: string, failures: number): void {
    this.#timers.arm(key, this.#clock.now() + Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (failures - 1)));
  }

  /** The key's write succeeded, or there is nothing left to write: it no longer waits. */
  cleared(key: string): void {
    this.#resumed.delete(key);
    if (!this.#failures.delete(key)) return;
    this.#timers.disarm(key);
  }

  /**
   * The key was picked up again after its pause and no longer waits, but its write has not been
   * made yet: a failure of it before any write succeeds counts on from the failures before (a
   * delay's completion, say, fails again at once as its timer fires at once).
   */
  resumed(key: string): void {
    const failures = this.#failures.get(key);
    if (failures === undefined) return;
    this.cleared(key);
    const now = this.#clock.now();
    this.#resumed.set(key, { failures, at: now });
    this.#sweepResumed(({ at }) => !this.#recent(at, now));
  }

  /** The failures of a key resumed within MAX_RETRY_MS, if any. */
  #recentlyResumed(key: string): number | undefined {
    const resumed = this.#resumed.get(key);
    return resumed !== undefined && this.#recent(resumed.at, this.#clock.now()) ? resumed.failures : undefined;
  }

  /** Within MAX_RETRY_MS of `at` (either way: a clock set back counts as recent). */
  #recent = (at: number, now: number): boolean => Math.abs(now - at) <= MAX_RETRY_MS;

  close(): void {
    this.#timers.close();
  }
}
