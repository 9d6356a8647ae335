// A binary min-heap ordered by a comparison: push and pop in O(log n). Entries that go stale are
// the caller's to skip when popped (lazy deletion), and to drop with `rebuild` once they pile up.

/** A plain data structure, hence a class. */
export class MinHeap<T> {
  #items: T[] = [];
  readonly #less: (a: T, b: T) => boolean;

  /** `less(a, b)`: whether `a` comes out before `b`. */
  constructor(less: (a: T, b: T) => boolean) {
    this.#less = less;
  }

  get size(): number {
    return this.#items.length;
  }

  /** The least entry, left in; undefined when empty. */
  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    const items = this.#items;
    let i = items.length;
    items.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(item, items[parent] as T)) break;
      items[i] = items[parent] as T;
      i = parent;
    }
    items[i] = item;
  }

  /** Takes the least entry out; undefined when empty. */
  pop(): T | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && this.#less(items[right] as T, items[left] as T) ? right : left;
      if (!this.#less(items[child] as T, last)) break;
      items[i] = items[child] as T;
      i = child;
    }
    items[i] = last;
    return top;
  }

  /** Keeps only the entries `keep` answers true for. */
  rebuild(keep: (item: T) => boolean): void {
    this.replaceWith(this.#items.filter(keep));
  }

  /** Holds `items` instead of what it held. */
  replaceWith(items: readonly T[]): void {
    this.#items = [];
    for (const item of items) this.push(item);
  }

  clear(): void {
    this.#items = [];
  }
}
