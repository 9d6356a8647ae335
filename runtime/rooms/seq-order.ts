// Puts durable live updates back into seq order before fan-out. Seqs are allocated when a write is
// queued, but writes become durable (and reach the rooms) in an order that can differ slightly, so
// a client resuming from the highest seq it saw could otherwise skip an update still on its way.

import type { RunUpdate } from './live-codec.ts';

/** How long a missing seq may hold back later ones (a write whose condition failed, or that aborted). */
export const GAP_GRACE_MS = 500;

interface OrgQueue {
  next: number;
  readonly pending: Map<number, RunUpdate>;
  timer: NodeJS.Timeout | undefined;
}

export class SeqOrder {
  readonly #queues = new Map<string, OrgQueue>();
  readonly #firstSeq: (orgId: string) => number;
  readonly #emit: (orgId: string, update: RunUpdate) => void;

  /** `firstSeq` is the first seq this process allocated for the org: nothing before it is waited for. */
  constructor(firstSeq: (orgId: string) => number, emit: (orgId: string, update: RunUpdate) => void) {
    this.#firstSeq = firstSeq;
    this.#emit = emit;
  }

  /** The highest seq already emitted for the org (0 when none). */
  emitted(orgId: string): number {
    const queue = this.#queues.get(orgId);
    return queue === undefined ? 0 : queue.next - 1;
  }

  /** Accepts durable updates in any order; emits every update whose predecessors are all emitted. */
  offer(orgId: string, updates: readonly RunUpdate[]): void {
    let queue = this.#queues.get(orgId);
    if (queue === undefined) {
      queue = { next: this.#firstSeq(orgId), pending: new Map(), timer: undefined };
      this.#queues.set(orgId, queue);
    }
    for (const update of updates) {
      // Older than what was already emitted (e.g. a gap skipped after its grace): emit at once.
      if (update.seq < queue.next) this.#emit(orgId, update);
      else queue.pending.set(update.seq, update);
    }
    this.#drain(orgId, queue);
  }

  /** Skips every current gap now (tests call this instead of waiting for the grace period). */
  releaseGaps(): void {
    for (const [orgId, queue] of this.#queues) this.#skipGap(orgId, queue);
  }

  close(): void {
    for (const queue of this.#queues.values()) if (queue.timer !== undefined) clearTimeout(queue.timer);
  }

  #drain(orgId: string, queue: OrgQueue): void {
    for (let update = queue.pending.get(queue.next); update !== undefined; update = queue.pending.get(queue.next)) {
      queue.pending.delete(queue.next);
      queue.next++;
      this.#emit(orgId, update);
    }
    if (queue.timer !== undefined) clearTimeout(queue.timer);
    queue.timer = undefined;
    if (queue.pending.size > 0) {
      queue.timer = setTimeout(() => this.#skipGap(orgId, queue), GAP_GRACE_MS);
      queue.timer.unref();
    }
  }

  #skipGap(orgId: string, queue: OrgQueue): void {
    if (queue.pending.size === 0) return;
    queue.next = Math.min(...queue.pending.keys());
    this.#drain(orgId, queue);
  }
}
