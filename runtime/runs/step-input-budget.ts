// How many payload bytes the steps being performed may hold at once, across all tenants. A webhook
// step builds its body from the event's whole payload and a custom action ships it to the
// hook-runner; with large events and slow receivers those copies (several per payload byte: the
// text, the body, its buffer, the signed string) outgrew the heap, and a restart then dispatched
// every recovered run at once and died again. A step whose payload does not fit waits, in order.

import { getHeapStatistics } from 'node:v8';
import { FifoQueue } from '../../actors/fifo-queue.ts';

/** The default: a sixteenth of V8's heap limit (about 259 MiB with Node's default heap here), at least 16 MiB. */
export function defaultStepInputBytes(): number {
  return Math.max(16 * 1024 * 1024, Math.floor(getHeapStatistics().heap_size_limit / 16));
}

interface Waiter {
  readonly bytes: number;
  readonly grant: () => void;
}

export class StepInputBudget {
  readonly #total: number;
  #free: number;
  readonly #waiting = new FifoQueue<Waiter>();

  constructor(totalBytes: number) {
    if (!(totalBytes >= 1)) throw new RangeError(`the step input budget must be at least 1 byte, got ${totalBytes}`);
    this.#total = totalBytes;
    this.#free = totalBytes;
  }

  /** Bytes taken now; steps waiting. For metrics and tests. */
  stats(): { readonly heldBytes: number; readonly waiting: number } {
    return { heldBytes: this.#total - this.#free, waiting: this.#waiting.size };
  }

  /**
   * Takes `bytes` now when they fit and no step waits before this one; false (nothing taken)
   * otherwise. A payload larger than the whole budget takes all of it, so it runs alone.
   */
  tryTake(bytes: number): boolean {
    const cost = this.#cost(bytes);
    if (this.#waiting.size > 0 || cost > this.#free) return false;
    this.#free -= cost;
    return true;
  }

  /** Resolves once `bytes` are taken, after every step that waited before. */
  take(bytes: number): Promise<void> {
    if (this.tryTake(bytes)) return Promise.resolve();
    return new Promise((grant) => this.#waiting.push({ bytes: this.#cost(bytes), grant }));
  }

  /** Gives back what a `take` or a successful `tryTake` of `bytes` took, and lets waiters in. */
  release(bytes: number): void {
    this.#free = Math.min(this.#total, this.#free + this.#cost(bytes));
    for (let next = this.#waiting.peek(); next !== undefined && next.bytes <= this.#free; next = this.#waiting.peek()) {
      this.#waiting.shift();
      this.#free -= next.bytes;
      next.grant();
    }
  }

  #cost(bytes: number): number {
    return Math.min(Math.max(0, bytes), this.#total);
  }
}
