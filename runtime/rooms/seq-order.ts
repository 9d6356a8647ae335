// Puts durable live updates back into seq order before fan-out. Seqs are allocated when a write is
// queued, but writes become durable (and reach the rooms) in an order that can differ slightly, so
// a client resuming from the highest seq it saw could otherwise skip an update still on its way.

import type { RunUpdate } from './live-codec.ts';

/** How long a missing seq may hold back later ones (a write whose condition failed, or that aborted). */
export const GAP_GRACE_MS = 500;

interface OrgQueue {
  next: number;
  /** Durable updates waiting for a predecessor; null marks a seq to pass over without emitting. */
  readonly pending: Map<number, RunUpdate | null>;
  timer: NodeJS.Timeout | undefined;
  /** The missing seq the timer waits for: later offers do not restart its grace, or steady traffic would hold a gap forever. */
  timerFor: number;
  /** Seqs skipped as gaps and not emitted since, with when they were skipped. */
  readonly skipped: Map<number, number>;
}

/** How long a skipped seq counts as possibly still on its way (a write this late is not expected). */
export const SKIPPED_MEMORY_MS = 60_000;

export class SeqOrder {
  readonly #queues = new Map<string, OrgQueue>();
  readonly #firstSeq: (orgId: string) => number;
  readonly #emit: (orgId: string, update: RunUpdate, late: boolean) => void;

  /**
   * `firstSeq` is the first seq this process allocated for the org: nothing before it is waited for.
   * `emit` is told `late` for an update released after later seqs (its gap had been skipped).
   */
  constructor(firstSeq: (orgId: string) => number, emit: (orgId: string, update: RunUpdate, late: boolean) => void) {
    this.#firstSeq = firstSeq;
    this.#emit = emit;
  }

  /** The highest seq already emitted for the org (0 when none). */
  emitted(orgId: string): number {
    const queue = this.#queues.get(orgId);
    return queue === undefined ? 0 : queue.next - 1;
  }

  /** The seqs in (after, upTo] skipped as gaps and not emitted since (within SKIPPED_MEMORY_MS). */
  skippedBetween(orgId: string, after: number, upTo: number, nowMs = Date.now()): Set<number> {
    const queue = this.#queues.get(orgId);
    const found = new Set<number>();
    if (queue === undefined) return found;
    forgetOldSkips(queue, nowMs);
    for (const seq of queue.skipped.keys()) if (seq > after && seq <= upTo) found.add(seq);
    return found;
  }

  /**
   * Whether `seq` was skipped as a gap and has not been emitted since: its write may be committed
   * but not yet on disk, so a replay that finds it in the log must not send it yet.
   */
  isSkipped(orgId: string, seq: number, nowMs = Date.now()): boolean {
    const queue = this.#queues.get(orgId);
    const skippedAt = queue?.skipped.get(seq);
    if (queue === undefined || skippedAt === undefined) return false;
    if (nowMs - skippedAt <= SKIPPED_MEMORY_MS) return true;
    // Not published a minute on: its write never became durable here (a failed flush), or it is
    // on disk since; either way, waiting on it would keep it out of every replay for good.
    queue.skipped.delete(seq);
    return false;
  }

  /** Accepts durable updates in any order; emits every update whose predecessors are all emitted. */
  offer(orgId: string, updates: readonly RunUpdate[]): void {
    const queue = this.#queue(orgId);
    for (const update of updates) {
      // Older than what was already emitted (e.g. a gap skipped after its grace): emit at once.
      if (update.seq < queue.next) {
        queue.skipped.delete(update.seq);
        this.#emit(orgId, update, true);
      } else {
        queue.pending.set(update.seq, update);
      }
    }
    this.#drain(orgId, queue);
  }

  /**
   * A seq that was reserved without an update (a sandbox reset's mark) counts as emitted, in its
   * turn, without anything sent: later seqs do not wait for it as a gap.
   */
  passOver(orgId: string, seq: number): void {
    const queue = this.#queue(orgId);
    if (seq < queue.next) return;
    queue.pending.set(seq, null);
    this.#drain(orgId, queue);
  }

  /**
   * A sandbox reset's mark (`seq`) once the reset is durable: every seq below it not yet emitted is
   * skipped as a gap now (its update, should it land, is sent late, as after a gap's grace), and the
   * mark passed over, so the position a client hears from now on is past the reset's (a client that
   * joined after it and resumed from what it heard was taken for one from before the reset).
   */
  passOverSkippingEarlier(orgId: string, seq: number): void {
    const queue = this.#queue(orgId);
    if (seq < queue.next) return;
    queue.pending.set(seq, null);
    // The grace timer of the first gap goes: each gap up to the mark is skipped now, as its timer
    // would have skipped it (#skipGap), and the last drain arms one for any gap past the mark.
    if (queue.timer !== undefined) clearTimeout(queue.timer);
    while (queue.next <= seq) this.#skipGap(orgId, queue);
  }

  /** Skips every current gap now (tests call this instead of waiting for the grace period). */
  releaseGaps(): void {
    for (const [orgId, queue] of this.#queues) this.#skipGap(orgId, queue);
  }

  close(): void {
    for (const queue of this.#queues.values()) if (queue.timer !== undefined) clearTimeout(queue.timer);
  }

  /** Lets go of the org's queue and its gap timer (the org's removal is finished: nothing of it is published again). */
  forget(orgId: string): void {
    const queue = this.#queues.get(orgId);
    if (queue?.timer !== undefined) clearTimeout(queue.timer);
    this.#queues.delete(orgId);
  }

  #queue(orgId: string): OrgQueue {
    let queue = this.#queues.get(orgId);
    if (queue === undefined) {
      queue = { next: this.#firstSeq(orgId), pending: new Map(), timer: undefined, timerFor: 0, skipped: new Map() };
      this.#queues.set(orgId, queue);
    }
    return queue;
  }

  #drain(orgId: string, queue: OrgQueue): void {
    for (let update = queue.pending.get(queue.next); update !== undefined; update = queue.pending.get(queue.next)) {
      queue.pending.delete(queue.next);
      queue.next++;
      if (update !== null) this.#emit(orgId, update, false);
    }
    // The grace of a gap runs from when that seq was first missed, whatever arrives meanwhile.
    if (queue.timer !== undefined && queue.pending.size > 0 && queue.timerFor === queue.next) return;
    if (queue.timer !== undefined) clearTimeout(queue.timer);
    queue.timer = undefined;
    if (queue.pending.size > 0) {
      queue.timerFor = queue.next;
      queue.timer = setTimeout(() => this.#skipGap(orgId, queue), GAP_GRACE_MS);
      queue.timer.unref();
    }
  }

  #skipGap(orgId: string, queue: OrgQueue): void {
    queue.timer = undefined;
    if (queue.pending.size === 0) return;
    let resume = Number.POSITIVE_INFINITY;
    for (const seq of queue.pending.keys()) if (seq < resume) resume = seq;
    const now = Date.now();
    forgetOldSkips(queue, now);
    // Remembered (for SKIPPED_MEMORY_MS) so that a Subscribe does not count them as sent to a socket
    // that was on the topic (skippedBetween, used by runtime/rooms/live-room-entry.ts): one may still arrive late.
    for (let seq = queue.next; seq < resume; seq++) queue.skipped.set(seq, now);
    queue.next = resume;
    this.#drain(orgId, queue);
  }
}

/** Drops skipped seqs older than SKIPPED_MEMORY_MS: the memory of an org's gaps stays bounded. */
function forgetOldSkips(queue: OrgQueue, nowMs: number): void {
  for (const [seq, skippedAt] of queue.skipped) if (nowMs - skippedAt > SKIPPED_MEMORY_MS) queue.skipped.delete(seq);
}
