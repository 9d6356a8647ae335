// Counts per key that forget a key once it is back to zero: per-org tallies (simulations running,
// sockets open, bytes held, writes in flight) without a map that grows with every org ever seen.

/** A plain data structure, hence a class. */
export class KeyedCounts {
  readonly #counts = new Map<string, number>();

  /** The count of `key` (0 when none). */
  get(key: string): number {
    return this.#counts.get(key) ?? 0;
  }

  add(key: string, amount = 1): void {
    this.#counts.set(key, this.get(key) + amount);
  }

  /** Takes `amount` off `key`; at zero (or below) the key is forgotten. */
  subtract(key: string, amount = 1): void {
    const left = this.get(key) - amount;
    if (left > 0) this.#counts.set(key, left);
    else this.#counts.delete(key);
  }
}
