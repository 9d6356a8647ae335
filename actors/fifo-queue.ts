// A first-in first-out queue on a growable ring buffer: O(1) push and shift at any size.
// Array#shift is O(n); a tenant with 100,000 queued runs must not make every admission pay for it.

/** A plain data structure, hence a class: the ring's head/size bookkeeping must stay private. */
export class FifoQueue<T> {
  #items: Array<T | undefined>;
  #head = 0;
  #size = 0;

  constructor(initialCapacity = 16) {
    this.#items = new Array<T | undefined>(Math.max(2, initialCapacity));
  }

  get size(): number {
    return this.#size;
  }

  push(item: T): void {
    if (this.#size === this.#items.length) this.#grow();
    this.#items[(this.#head + this.#size) % this.#items.length] = item;
    this.#size += 1;
  }

  /** Removes and returns the oldest item, or `undefined` when empty. */
  shift(): T | undefined {
    if (this.#size === 0) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined; // let the item be collected
    this.#head = (this.#head + 1) % this.#items.length;
    this.#size -= 1;
    return item;
  }

  peek(): T | undefined {
    return this.#size === 0 ? undefined : this.#items[this.#head];
  }

  /** Oldest first; for tests and diagnostics (O(n)). */
  toArray(): T[] {
    const out: T[] = [];
    for (let i = 0; i < this.#size; i += 1) out.push(this.#items[(this.#head + i) % this.#items.length] as T);
    return out;
  }

  #grow(): void {
    const next = new Array<T | undefined>(this.#items.length * 2);
    for (let i = 0; i < this.#size; i += 1) next[i] = this.#items[(this.#head + i) % this.#items.length];
    this.#items = next;
    this.#head = 0;
  }
}
