// How many runs the event writes in flight may build together. An event is stored with the runs it
// starts, built on the event loop inside its write (about 0.12 ms a run and 7 µs a step): thirty
// API events at once, each starting 100 workflows of 50 steps, held every org's requests 1.5 s, and 100
// schedules ticking together 4-8 s (lmdb-js runs the callbacks of the transactions queued meanwhile
// in one go; found by big-tenant probes). A write takes its runs' weight from this budget before
// it is queued and gives it back once it has settled (event-write-turns.ts). Orgs take turns:
// each org's writes wait in the order they came, and the orgs waiting are served round-robin, so
// one org's flood of fan-outs delays another org's event by one turn, not by the flood. A write
// heavier than the whole budget goes alone; one that builds no run waits only behind its own org.

import { FifoQueue } from '../../actors/fifo-queue.ts';

/** What a run weighs beside its steps: building one costs about as much as 16 steps. */
export const RUN_WEIGHT = 16;

/** The weight the writes in flight may build together: 64 runs of 50 steps, ~30-60 ms of the event loop. */
export const EVENT_RUNS_IN_FLIGHT = 64 * (RUN_WEIGHT + 50);

/** A run's weight in the budget: `steps` its workflow version has. */
export const runWeight = (steps: number): number => RUN_WEIGHT + steps;

interface Waiter {
  readonly weight: number;
  /** When the write first came: a write that gave its turn back (a sandbox reset began) keeps its place by it. */
  readonly ticket: number;
  readonly grant: () => void;
}

export class EventRunsGate {
  readonly #capacity: number;
  /** Per org with writes waiting, those writes in the order they came. */
  readonly #waiting = new Map<string, FifoQueue<Waiter>>();
  /** The orgs with writes waiting, in the order their turns come. */
  readonly #turns = new FifoQueue<string>();
  #held = 0;
  #tickets = 0;

  constructor(capacity = EVENT_RUNS_IN_FLIGHT) {
    this.#capacity = capacity;
  }

  /** Weight taken by writes in flight, and writes waiting. */
  stats(): { readonly held: number; readonly waiting: number } {
    let waiting = 0;
    for (const queue of this.#waiting.values()) waiting += queue.size;
    return { held: this.#held, waiting };
  }

  /** Takes `weight` for one of the org's writes if it may go now (nothing it must wait behind), and says whether it did. */
  tryTake(orgId: string, weight: number): boolean {
    if (this.#waiting.has(orgId)) return false;
    // Builds nothing: delays no one, so it waits only behind its own org's writes.
    if (weight === 0) return true;
    if (this.#turns.size > 0 || !this.#fits(weight)) return false;
    this.#held += weight;
    return true;
  }

  /** A new write's place in its org's order (take's `ticket`). */
  ticket(): number {
    return ++this.#tickets;
  }

  /**
   * Resolves once the org's write of `weight` may go (taken then): after its org's earlier writes, in
   * its org's turn. `ticket`: the place of a write that came before (it gave its turn back and takes
   * one again), ahead of the org's writes that came after it; default a new one, behind them all.
   */
  async take(orgId: string, weight: number, ticket?: number): Promise<void> {
    if (this.tryTake(orgId, weight)) return;
    await new Promise<void>((grant) => {
      let queue = this.#waiting.get(orgId);
      if (queue === undefined) {
        queue = new FifoQueue<Waiter>();
        this.#waiting.set(orgId, queue);
        this.#turns.push(orgId);
      }
      const waiter = { weight, ticket: ticket ?? this.ticket(), grant };
      if (ticket === undefined) queue.push(waiter);
      else this.#waiting.set(orgId, inPlace(queue, waiter));
    });
  }

  /** Gives back what a write took, once it has settled (committed or failed). */
  give(weight: number): void {
    this.#held -= weight;
    for (let orgId = this.#turns.peek(); orgId !== undefined; orgId = this.#turns.peek()) {
      const queue = this.#waiting.get(orgId)!;
      const next = queue.peek()!;
      if (!this.#fits(next.weight)) return;
      queue.shift();
      this.#turns.shift();
      if (queue.size > 0) this.#turns.push(orgId);
      else this.#waiting.delete(orgId);
      this.#held += next.weight;
      next.grant();
    }
  }

  #fits(weight: number): boolean {
    return weight === 0 || this.#held === 0 || this.#held + weight <= this.#capacity;
  }
}

/** The queue with `waiter` among its writes by ticket (rare: a write back from a sandbox reset's start). */
function inPlace(queue: FifoQueue<Waiter>, waiter: Waiter): FifoQueue<Waiter> {
  const waiters = queue.toArray();
  const at = waiters.findIndex((other) => other.ticket > waiter.ticket);
  waiters.splice(at === -1 ? waiters.length : at, 0, waiter);
  const placed = new FifoQueue<Waiter>(waiters.length);
  for (const each of waiters) placed.push(each);
  return placed;
}
