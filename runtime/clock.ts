// The injected time source: production uses the system clock, tests a manual one.
// Nothing in the runtime calls Date.now() directly, so timestamp tolerance and pruning are testable.

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

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
