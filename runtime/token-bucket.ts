// A token bucket on an injected clock: up to `capacity` tokens, refilled at `perSecond`. Time that
// runs backwards (a wall clock set back) refills nothing and takes nothing away: the bucket never
// owes tokens for time it did not see pass, so a clock set back an hour locks no one out for an hour.
// A take larger than the capacity (a payload bigger than a second's bytes) waits for a full bucket
// and leaves it in debt, which the refill pays off before anything else is taken.

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

  /** How many ms until `amount` tokens can be taken: 0 when they can be now. Takes nothing. */
  waitFor(now: number, amount = 1): number {
    this.#tokens = Math.min(this.capacity, this.#tokens + (Math.max(0, now - this.#countedAt) * this.perSecond) / 1000);
    this.#countedAt = now;
    const needed = Math.min(amount, this.capacity);
    return this.#tokens < needed ? Math.max(1, Math.ceil(((needed - this.#tokens) / this.perSecond) * 1000)) : 0;
  }

  /** Takes `amount` tokens: 0 when taken, else how many ms until they will be there (nothing taken). */
  take(now: number, amount = 1): number {
    const waitMs = this.waitFor(now, amount);
    if (waitMs === 0) this.#tokens -= amount;
    return waitMs;
  }

  /**
   * Takes `amount` tokens even past what is there, leaving the bucket at most `credit` in debt: 0
   * when taken, else how many ms until it could be (nothing taken). What is taken on credit is paid
   * off by the refill before anything else is taken, so the rate over time stays the bucket's.
   */
  takeOnCredit(now: number, amount: number, credit: number): number {
    this.waitFor(now, 0);
    const short = amount - credit - this.#tokens;
    if (short > 0) return Math.max(1, Math.ceil((short / this.perSecond) * 1000));
    this.#tokens -= amount;
    return 0;
  }

  /** Returns tokens taken for something that did not happen after all. */
  giveBack(amount = 1): void {
    this.#tokens = Math.min(this.capacity, this.#tokens + amount);
  }
}
