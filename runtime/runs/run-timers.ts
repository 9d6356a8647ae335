// In-memory timers for runs waiting in backoff or a delay step, and for schedules' ticks. They are
// durable because each due time is derived from what is stored: boot recovery re-arms a run's from
// its `pendingWork`, the ticker a schedule's from its record. Due times are wall-clock times, while
// Node's timers count monotonic time, which stands still while the host is suspended and ignores a
// wall clock stepped forward: the wake-up is never further away than RECHECK_MS, so such a timer
// is at most that late. A wall clock set back is noticed at the next look (onClockBack): owners
// whose due times are worked out from the clock (the schedule ticker) arm them again from now.
// Many timers due at once (a clock stepped forward, a host resumed) fire FIRE_BATCH per event-loop
// turn: each fired run does its transition before the loop turns again (~84 us), so 30,000 at once
// held every request ~2.5 s. Due timers fire orgs in turn (keys are orgScopedKey): one org's
// 100,000 delays due together held another org's, due a moment later, behind all of them (~390 turns).

import { FifoQueue } from '../../actors/fifo-queue.ts';
import { MinHeap } from '../../actors/min-heap.ts';
import type { Clock } from '../clock.ts';
import { orgScopedParts } from '../tenancy/org-scoped-key.ts';

interface Entry {
  readonly at: number;
  readonly key: string;
}

/** The longest the timers sleep before looking at the clock again. */
const RECHECK_MS = 60_000;
/** A clock read this much earlier than the latest one seen was set back (not jitter between reads). */
const CLOCK_BACK_MS = 1000;
/** The most timers fired in one event-loop turn; the rest fire in the next turns. */
export const FIRE_BATCH = 256;
/** The most due timers taken from the heap in one turn into their orgs' queues (popping is cheap; firing is not). */
const TAKE_BATCH = 16 * FIRE_BATCH;
/** Heaps smaller than this are never compacted: a rebuild would cost more than the stale entries. */
const COMPACT_FLOOR = 1024;

/** A min-heap of due times keyed by run; `fireDue` is the only place timers fire. */
export class RunTimers {
  readonly #clock: Clock;
  readonly #onDue: (key: string) => void;
  readonly #due = new Map<string, number>();
  readonly #heap = new MinHeap<Entry>((a, b) => a.at < b.at);
  /** Timers taken from the heap as due, per org in due order, not fired yet: orgs fire in turn. */
  readonly #ready = new Map<string, FifoQueue<Entry>>();
  #handle: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #recheckMs: number;
  readonly #onClockBack: (() => void) | undefined;
  /** Timers fired per event-loop turn at most (FIRE_BATCH unless given). */
  readonly #fireBatch: number;
  /** The latest clock reading seen by fireDue (after a set back: that reading). */
  #latestNow: number;

  /**
   * `onClockBack` is called (before anything fires) when fireDue finds the clock set back behind
   * what it read before; without it, timers armed before keep their wall-clock times.
   */
  constructor(clock: Clock, onDue: (key: string) => void, recheckMs = RECHECK_MS, onClockBack?: () => void, fireBatch = FIRE_BATCH) {
    this.#fireBatch = fireBatch;
    this.#clock = clock;
    this.#onDue = onDue;
    this.#recheckMs = recheckMs;
    this.#onClockBack = onClockBack;
    this.#latestNow = clock.now();
  }

  get size(): number {
    return this.#due.size;
  }

  /** Heap entries, stale ones (disarmed or re-armed) included: stays within a small multiple of `size`. */
  get heapLength(): number {
    return this.#heap.size;
  }

  /** Arms (or re-arms) the timer of `key` for the absolute time `at`. */
  arm(key: string, at: number): void {
    this.#due.set(key, at);
    this.#heap.push({ at, key });
    this.#compactIfStale();
    this.#schedule();
  }

  /** When the timer of `key` is due, or undefined when none is armed. */
  dueAt(key: string): number | undefined {
    return this.#due.get(key);
  }

  disarm(key: string): void {
    if (this.#due.delete(key)) this.#compactIfStale();
  }

  /**
   * A disarmed or re-armed timer leaves its old entry in the heap until that entry's time, which may
   * be days away: once stale entries outnumber live ones (past a floor), the heap is rebuilt from the
   * live ones.
   */
  #compactIfStale(): void {
    if (this.#heap.size <= COMPACT_FLOOR || this.#heap.size <= 2 * this.#due.size) return;
    this.#heap.replaceWith([...this.#due].map(([key, at]) => ({ at, key })));
  }

  /**
   * Fires the timers due at the clock's current time, at most its batch (FIRE_BATCH unless given),
   * orgs in turn (one timer of each org with any due, then again); the rest fire in the next turns,
   * on their own. Returns how many fired. Tests call it after advancing a manual clock.
   */
  fireDue(): number {
    const now = this.#clock.now();
    const setBack = now < this.#latestNow - CLOCK_BACK_MS;
    this.#latestNow = setBack ? now : Math.max(this.#latestNow, now);
    if (setBack) this.#onClockBack?.();
    // Stale entries (disarmed, or armed again) are dropped as they come and do not count.
    for (let taken = 0; taken < TAKE_BATCH && (this.#heap.peek()?.at ?? Number.POSITIVE_INFINITY) <= now; ) {
      const entry = this.#heap.pop() as Entry;
      if (this.#due.get(entry.key) !== entry.at) continue;
      const org = orgScopedParts(entry.key)[0];
      let queue = this.#ready.get(org);
      if (queue === undefined) this.#ready.set(org, (queue = new FifoQueue()));
      queue.push(entry);
      taken++;
    }
    let fired = 0;
    while (fired < this.#fireBatch && this.#ready.size > 0) {
      // The org whose turn it is, then to the back of the line (across turns too) while it has more.
      const [org, queue] = this.#ready.entries().next().value as [string, FifoQueue<Entry>];
      this.#ready.delete(org);
      const entry = queue.shift() as Entry;
      if (queue.size > 0) this.#ready.set(org, queue);
      // Disarmed or armed again since it was taken: not this entry's time any more.
      if (this.#due.get(entry.key) !== entry.at) continue;
      this.#due.delete(entry.key);
      fired++;
      this.#onDue(entry.key);
    }
    this.#schedule();
    return fired;
  }

  close(): void {
    this.#closed = true;
    if (this.#handle !== undefined) clearTimeout(this.#handle);
  }

  #schedule(): void {
    if (this.#closed) return;
    if (this.#handle !== undefined) clearTimeout(this.#handle);
    this.#handle = undefined;
    const next = this.#heap.peek();
    if (next === undefined && this.#ready.size === 0) return;
    const delay = this.#ready.size > 0 || next === undefined ? 0 : Math.min(this.#recheckMs, Math.max(0, next.at - this.#clock.now()));
    this.#handle = setTimeout(() => this.fireDue(), delay);
    this.#handle.unref();
  }
}
