// When the runner prunes its old invocation records and fences (record-pruning.ts): at start and
// then every PRUNE_INTERVAL_MS, one prune at a time, none while the disk is below its floor
// (removals write pages too). Remembers whether the last prune failed, which Health reports, and
// stops at shutdown after the pass in progress. Ages are measured on elapsed-bounded-clock.ts's
// clock: a wall clock stepped 31 days forward while the runner ran pruned every record and fence,
// minutes old, at the next pass (a retried call then ran its guest again).

import { wallCappedByElapsed } from './elapsed-bounded-clock.ts';
import { PRUNE_INTERVAL_MS, type pruneRunnerRecords } from './record-pruning.ts';
import type { RunnerStore } from './store.ts';

export class RecordPruning {
  readonly #prune: typeof pruneRunnerRecords;
  readonly #failed: (error: unknown) => void;
  readonly #monotonic: () => number;
  readonly #stop = new AbortController();
  #running: Promise<unknown> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #failing = false;

  /** `failed` logs a prune's failure; `monotonic` counts time passing (tests give their own). */
  constructor(prune: typeof pruneRunnerRecords, failed: (error: unknown) => void, monotonic: () => number = () => performance.now()) {
    this.#prune = prune;
    this.#failed = failed;
    this.#monotonic = monotonic;
  }

  /** True while the last prune failed (its log line says why); the next one that works clears it. */
  get failing(): boolean {
    return this.#failing;
  }

  /** Prunes now and every interval, by the wall clock `now` kept from running ahead; `writable` says whether the disk is above its floor. */
  start(store: RunnerStore, now: () => number, writable: () => boolean): void {
    const pruneNow = wallCappedByElapsed(now, this.#monotonic);
    const prune = (): void => {
      if (this.#running !== undefined || !writable()) return;
      this.#running = this.#prune(store, pruneNow(), undefined, undefined, this.#stop.signal)
        .then(
          () => (this.#failing = false),
          (error: unknown) => {
            this.#failing = true;
            this.#failed(error);
          },
        )
        .finally(() => (this.#running = undefined));
    };
    prune();
    this.#timer = setInterval(prune, PRUNE_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Starts no more prunes and resolves once the one in progress has stopped after its pass. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#stop.abort();
    await this.#running;
  }
}
