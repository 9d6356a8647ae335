// How far the wall clock is seen ahead of the time passed since a start, kept durably for the
// starts after it. A clock behind at the start and stepped forward later (a host without a
// real-time clock, before its NTP sync) dates what is written before the step behind by as much:
// dedup claims and history. The process that saw the step measures ages on the time passed since its
// start (prune-time.ts), so they kept; but the next start measured them on the wall clock, as that
// much older: a device message or webhook delivery sent again within the dedup window was taken as
// new (a second event, second runs and effects), and history was pruned early. Now this start's lag
// is recorded as it changes (checked each LAG_CHECK_MS, and at a clean stop), and later starts
// measure ages behind by it, until everything dated before it has aged out anyway: the longest of
// the dedup window and the retention after it was recorded. A lag is never lowered while a start
// runs: a clock corrected, then set back wrongly, must not drop the protection of what was dated
// behind before. So a clock set wrongly ahead, even for a moment, and a suspend (the monotonic clock
// stands still: it looks like a step) keep things longer by as much: the safe side. A record dated
// ahead of the wall clock at a start (the clock was wrongly ahead when it was written) is taken as
// made at that start, and written back so: kept the keep time from there, not until its date.

import { durably } from './ledger/durable-write.ts';
import type { Ledger, LedgerTable } from './ledger/ledger.ts';
import type { Clock } from './clock.ts';

/** How often the wall clock is compared with the time passed since the start. */
export const LAG_CHECK_MS = 1000;

/** A lag that grew by less than this is not written again (NTP slewing, timer jitter). */
export const LAG_NOTICED_MS = 1000;

const TABLE = 'runtime-clock';
const KEY = 'lag';

interface LagRecord {
  /** How far behind the wall clock (as it read at `recorded_at_ms`) things may be dated. */
  readonly lag_ms: number;
  /** The wall clock when the lag was last written. */
  readonly recorded_at_ms: number;
}

const isLagRecord = (value: unknown): value is LagRecord =>
  typeof value === 'object' && value !== null && Number.isFinite((value as LagRecord).lag_ms) && Number.isFinite((value as LagRecord).recorded_at_ms);

export class ClockLag {
  readonly #ledger: Ledger;
  readonly #table: LedgerTable;
  readonly #clock: Clock;
  readonly #keepForMs: number;
  /** What the starts before this one recorded, while it is still kept (read once, at this start). */
  readonly #carried: LagRecord | undefined;
  /** This start's own lag as last written (0: none). */
  #ownLag = 0;
  /** The carried record was dated ahead of this start's wall clock: written back as clamped at the first check. */
  #writeBack = false;
  readonly #startedWall: number;
  readonly #startedMonotonic: number | undefined;
  #checking: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;

  /** `keepForMs`: how long after it was recorded a lag is kept (the longest of the dedup window and the retention). */
  constructor(ledger: Ledger, clock: Clock, keepForMs: number) {
    this.#ledger = ledger;
    this.#table = ledger.openDatabase(TABLE);
    this.#clock = clock;
    this.#keepForMs = keepForMs;
    this.#startedWall = clock.now();
    this.#startedMonotonic = clock.monotonic?.();
    const stored: unknown = this.#table.get(KEY);
    if (isLagRecord(stored) && stored.lag_ms > 0) {
      const recordedAt = Math.min(stored.recorded_at_ms, this.#startedWall);
      if (this.#startedWall < recordedAt + keepForMs) this.#carried = { lag_ms: stored.lag_ms, recorded_at_ms: recordedAt };
      this.#writeBack = this.#carried !== undefined && recordedAt < stored.recorded_at_ms;
    }
  }

  /** How far behind `agesAt` (prune-time.ts) ages are measured: an earlier start's lag, until `keepForMs` after it was recorded. */
  carriedAt(agesAt: number): number {
    const carried = this.#carried;
    return carried !== undefined && agesAt < carried.recorded_at_ms + this.#keepForMs ? carried.lag_ms : 0;
  }

  /** Checks each LAG_CHECK_MS from now on (the timer does not hold the process open). */
  start(): void {
    this.#timer ??= setInterval(() => void this.check().catch(() => undefined), LAG_CHECK_MS).unref();
  }

  /**
   * Compares the wall clock with the time passed since the start; a lag that grew by LAG_NOTICED_MS
   * or more since it was last written is written, durably (a failed write, below the disk floor say,
   * is tried at the next check). One check at a time.
   */
  check(): Promise<void> {
    return (this.#checking ??= this.#checkOnce().finally(() => (this.#checking = undefined)));
  }

  /** Stops the checks after a last one (a clean stop), before the ledger closes. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.check().catch(() => undefined);
  }

  async #checkOnce(): Promise<void> {
    const monotonic = this.#clock.monotonic?.();
    if (monotonic === undefined || this.#startedMonotonic === undefined) return;
    const wall = this.#clock.now();
    const sinceStart = this.#startedWall + (monotonic - this.#startedMonotonic);
    const own = Math.max(0, wall - sinceStart);
    const grew = own >= this.#ownLag + LAG_NOTICED_MS;
    if (!grew && !this.#writeBack) return;
    // The carried lag stays covered (things an earlier start dated behind may be older still), now
    // for the keep time from here, as this start's own lag is: the larger of the two covers both.
    // Whether it is still kept is told on the scale it was read on (the wall at this start, moved on
    // by the time passed), not on a wall clock stepped since.
    const carried = this.carriedAt(Math.min(wall, sinceStart)) > 0 ? this.#carried : undefined;
    const next: LagRecord = grew
      ? { lag_ms: Math.max(own, carried?.lag_ms ?? 0), recorded_at_ms: Math.max(wall, carried?.recorded_at_ms ?? wall) }
      : (carried ?? { lag_ms: 0, recorded_at_ms: wall });
    const root = this.#ledger.root;
    await durably(root, root.transaction(() => void this.#table.put(KEY, next)));
    if (grew) this.#ownLag = own;
    this.#writeBack = false;
  }
}
