// How many runs the schedule ticker's writes in flight may create together. Each tick's event is
// stored with the runs it starts, which are built on the event loop inside the write (about 0.5 ms
// a run, 1.5 ms at 50 steps), and lmdb-js runs the callbacks of every transaction queued meanwhile
// in one go: 100 schedules ticking at one minute, each starting 100 workflows of 50 steps, held
// every org's requests 4-8 s, longer each minute as runs piled up (found by a big-tenant probe).
// A tick takes its runs from this budget before its write is queued and gives them back once it
// has committed; ticks wait in the order they came, and one larger than the budget goes alone.

import { FifoQueue } from '../../actors/fifo-queue.ts';

/** Runs the ticks' writes in flight may create together (~30-100 ms of the event loop). */
export const TICK_RUNS_IN_FLIGHT = 64;

interface Waiter {
  readonly runs: number;
  readonly grant: () => void;
}

export class TickRunsGate {
  readonly #capacity: number;
  readonly #waiting = new FifoQueue<Waiter>();
  #held = 0;

  constructor(capacity = TICK_RUNS_IN_FLIGHT) {
    this.#capacity = capacity;
  }

  /** Runs taken by writes in flight, and ticks waiting. */
  stats(): { readonly held: number; readonly waiting: number } {
    return { held: this.#held, waiting: this.#waiting.size };
  }

  /** Resolves once `runs` fit (or nothing else is in flight), after the ticks that came before. */
  async take(runs: number): Promise<void> {
    if (this.#waiting.size === 0 && this.#fits(runs)) {
      this.#held += runs;
      return;
    }
    await new Promise<void>((grant) => this.#waiting.push({ runs, grant }));
  }

  /** Gives back what a write took, once it has committed (or failed). */
  give(runs: number): void {
    this.#held -= runs;
    for (let next = this.#waiting.peek(); next !== undefined && this.#fits(next.runs); next = this.#waiting.peek()) {
      this.#waiting.shift();
      this.#held += next.runs;
      next.grant();
    }
  }

  #fits(runs: number): boolean {
    return this.#held === 0 || this.#held + runs <= this.#capacity;
  }
}
