// Admission of one tenant's runs: at most `limit` running at once, FIFO within the tenant,
// with runs that already started (timer woke, resumed, recovered) ahead of never-started ones.
//
// Why a mutable structure and not an XState machine or an immutable reducer: every operation
// must stay O(1) with 100,000 queued runs, and copying a queue per event is O(n). The state is
// not durable either — on boot it is rebuilt from run snapshots (`pendingWork` says which runs
// await admission, and in which lane) — so nothing here needs snapshots or replay.
//
// Lanes: `resume` is served before `new`. A run that waited on a timer gives its slot back
// while waiting; when it wakes it has already done work (and may hold resources on the other
// side), so finishing it first keeps in-flight runs few and their latency bounded. Each lane
// is FIFO. Removing a queued run is O(1): its ticket is forgotten and skipped when reached, and
// the lanes are compacted once forgotten tickets outnumber live ones (a tenant that admits
// nothing, at limit 0 or full, reaches none of them).

import type { OrgId, RunId } from './ids.ts';
import { FifoQueue } from './fifo-queue.ts';
import type { AdmissionLane } from './run-work.ts';

export const DEFAULT_MAX_CONCURRENT_RUNS = 4;
/** Forgotten tickets tolerated beyond twice the live ones before the lanes are compacted. */
const COMPACT_AFTER = 1024;

interface Ticket {
  readonly runId: RunId;
  readonly seq: number;
}

export type RunPlace = 'running' | 'queued' | 'absent';

export class TenantSupervisor {
  readonly orgId: OrgId;
  #limit: number;
  #seq = 0;
  readonly #running = new Set<RunId>();
  /** runId -> seq of its live ticket; tickets whose seq differs are tombstones. */
  readonly #queued = new Map<RunId, number>();
  readonly #lanes: Record<AdmissionLane, FifoQueue<Ticket>> = { resume: new FifoQueue(), new: new FifoQueue() };

  constructor(orgId: OrgId, limit = DEFAULT_MAX_CONCURRENT_RUNS) {
    this.orgId = orgId;
    this.#limit = checkLimit(limit);
  }

  get limit(): number {
    return this.#limit;
  }

  /** Lowering the limit never preempts: running runs finish, and admission waits until below it. */
  setLimit(limit: number): void {
    this.#limit = checkLimit(limit);
  }

  get runningCount(): number {
    return this.#running.size;
  }

  get queuedCount(): number {
    return this.#queued.size;
  }

  /** True when a run is ready and a slot is free. */
  canAdmit(): boolean {
    return this.#queued.size > 0 && this.#running.size < this.#limit;
  }

  isIdle(): boolean {
    return this.#queued.size === 0 && this.#running.size === 0;
  }

  placeOf(runId: RunId): RunPlace {
    return this.#running.has(runId) ? 'running' : this.#queued.has(runId) ? 'queued' : 'absent';
  }

  /** Idempotent: a run already queued or running keeps its place and `false` is returned. */
  enqueue(runId: RunId, lane: AdmissionLane): boolean {
    if (this.#running.has(runId) || this.#queued.has(runId)) return false;
    this.#seq += 1;
    this.#queued.set(runId, this.#seq);
    this.#lanes[lane].push({ runId, seq: this.#seq });
    return true;
  }

  /** Frees the run's slot, or drops it from the queue (cancelled before admission). */
  release(runId: RunId): RunPlace {
    if (this.#running.delete(runId)) return 'running';
    if (!this.#queued.delete(runId)) return 'absent';
    if (this.ticketCount > 2 * this.#queued.size + COMPACT_AFTER) this.#compact();
    return 'queued';
  }

  /** Tickets the lanes hold, live or forgotten (for tests and diagnostics). */
  get ticketCount(): number {
    return this.#lanes.resume.size + this.#lanes.new.size;
  }

  /** Moves the next ready run (resume lane first) into a slot; `undefined` if none may start. */
  admitNext(): RunId | undefined {
    if (!this.canAdmit()) return undefined;
    const runId = this.#take('resume') ?? this.#take('new');
    if (runId === undefined) return undefined;
    this.#queued.delete(runId);
    this.#running.add(runId);
    return runId;
  }

  /** Queued run ids in admission order (O(n); for tests and diagnostics). */
  queuedInOrder(): RunId[] {
    return [...this.#lanes.resume.toArray(), ...this.#lanes.new.toArray()]
      .filter((t) => this.#queued.get(t.runId) === t.seq)
      .map((t) => t.runId);
  }

  /** Drops forgotten tickets, keeping the order of live ones: O(n), once per n forgotten. */
  #compact(): void {
    for (const queue of Object.values(this.#lanes)) {
      for (let left = queue.size; left > 0; left -= 1) {
        const ticket = queue.shift() as Ticket;
        if (this.#queued.get(ticket.runId) === ticket.seq) queue.push(ticket);
      }
    }
  }

  #take(lane: AdmissionLane): RunId | undefined {
    const queue = this.#lanes[lane];
    // Each tombstone is skipped once, so the cost is amortised O(1) per enqueue.
    for (let ticket = queue.shift(); ticket !== undefined; ticket = queue.shift()) {
      if (this.#queued.get(ticket.runId) === ticket.seq) return ticket.runId;
    }
    return undefined;
  }
}

/** Throws a RangeError unless `limit` is an integer >= 0. */
export function checkLimit(limit: number): number {
  if (!Number.isInteger(limit) || limit < 0) throw new RangeError(`max_concurrent_runs must be an integer >= 0, got ${limit}`);
  return limit;
}
