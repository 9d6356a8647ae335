// The injected time source: production uses the system clock, tests a manual one.
// Nothing in the runtime calls Date.now() directly, so timestamp tolerance and pruning are testable.

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Milliseconds on a clock that only counts time passing (no jumps when the wall clock is set).
   * Absent: `now` is taken to count time passing (a test's manual clock).
   */
  monotonic?(): number;
}

export const systemClock: Clock = { now: () => Date.now(), monotonic: () => performance.now() };

/** Milliseconds passed since this call, on the clock's monotonic time when it has one: a wall clock set back would count backwards. */
export function elapsedSince(clock: Clock): () => number {
  const read = clock.monotonic === undefined ? () => clock.now() : () => clock.monotonic!();
  const start = read();
  return () => read() - start;
}

/** A clock that only moves when told to; for tests and for the `--clock-offset` of nothing else. */
export class ManualClock implements Clock {
  #now: number;
  constructor(startMs: number) {
    this.#now = startMs;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): void {
    this.#now += ms;
  }
  set(ms: number): void {
    this.#now = ms;
  }
}
