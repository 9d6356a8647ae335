// A token bucket on an injected clock: up to `capacity` tokens, refilled at `perSecond`. Time that
// runs backwards (a wall clock set back) refills nothing and takes nothing away: the bucket never
// owes tokens for time it did not see pass, so a clock set back an hour locks no one out for an hour.

export class TokenBucket {
  #tokens: number;
  #countedAt: number;

  constructor(
    readonly capacity: number,
    readonly perSecond: number,
    now: number,
  ) {
    this.#tokens = capacity;
    this.#countedAt = now;
  }

  /** Takes one token: 0 when taken, else how many ms until one will be there (nothing taken). */
  take(now: number): number {
    this.#tokens = Math.min(this.capacity, this.#tokens + (Math.max(0, now - this.#countedAt) * this.perSecond) / 1000);
    this.#countedAt = now;
    if (this.#tokens < 1) return Math.max(1, Math.ceil(((1 - this.#tokens) / this.perSecond) * 1000));
    this.#tokens -= 1;
    return 0;
  }

  /** Returns a token taken for something that did not happen after all. */
  giveBack(): void {
    this.#tokens = Math.min(this.capacity, this.#tokens + 1);
  }
}
