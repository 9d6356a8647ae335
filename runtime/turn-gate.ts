// Lets at most a given number of callers through per event-loop turn, the rest in later turns in
// the order they came: work that arrives all at once (a commit resolving thousands of writes) is
// spread so that requests are read between its slices.

import { FifoQueue } from '../actors/fifo-queue.ts';

export class TurnGate {
  readonly #perTurn: number;
  readonly #waiting = new FifoQueue<() => void>();
  /** Callers let through since the current turn's slice began. */
  #passed = 0;
  #turnScheduled = false;

  constructor(perTurn: number) {
    this.#perTurn = perTurn;
  }

  /** Resolves in this turn while its slice has room, else in a later turn. */
  async pass(): Promise<void> {
    if (this.#passed < this.#perTurn && this.#waiting.size === 0) {
      this.#passed++;
      this.#nextTurn();
      return;
    }
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }

  #nextTurn(): void {
    if (this.#turnScheduled) return;
    this.#turnScheduled = true;
    setImmediate(() => {
      this.#turnScheduled = false;
      this.#passed = 0;
      for (; this.#passed < this.#perTurn && this.#waiting.size > 0; this.#passed++) this.#waiting.shift()!();
      if (this.#passed > 0) this.#nextTurn();
    });
  }
}
