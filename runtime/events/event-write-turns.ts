// The turn every path that stores an event takes first: webhooks, API events, replays, device
// messages, connections and deletions, schedule ticks. A turn comes once no sandbox reset of the
// org is in flight (sandbox events: sandbox-generation.ts) and the runs the event starts fit the
// budget of runs built by writes in flight (event-runs-gate.ts); it is given back once the write
// has settled.
// Between a turn and its store nothing may await: a caller checks again, after the turn, what may
// have changed while it waited (`waited`: the org, the key, the source), then stores at once.

import type { EventRunsGate } from './event-runs-gate.ts';
import type { SandboxGenerations } from './sandbox-generation.ts';

export interface EventWriteTurn {
  /** Whether the turn waited (for a sandbox reset or the budget): what the caller read before may have changed. */
  readonly waited: boolean;
  /** Gives the turn back once the write has settled; once only. */
  release(): void;
}

/** The weight of the runs an event of `type` would start in the org's environment now (event-runs-gate.ts). */
export type RunsWeightOf = (orgId: string, environment: string, type: string) => number;

export class EventWriteTurns {
  readonly #gate: EventRunsGate;
  readonly #generations: SandboxGenerations;
  readonly #weightOf: RunsWeightOf;

  constructor(gate: EventRunsGate, generations: SandboxGenerations, weightOf: RunsWeightOf) {
    this.#gate = gate;
    this.#generations = generations;
    this.#weightOf = weightOf;
  }

  /**
   * Waits for the turn of an org's write storing events of `types` in `environment` (a device's
   * connection may write two). A sandbox turn waits out a reset holding none of the budget (one
   * org's reset would hold every org's writes), and again should one begin meanwhile.
   */
  async take(orgId: string, environment: string, ...types: string[]): Promise<EventWriteTurn> {
    const weight = types.reduce((sum, type) => sum + this.#weightOf(orgId, environment, type), 0);
    const sandbox = environment === 'sandbox';
    // Its place among the org's writes, kept should it give its turn back to wait out a reset.
    const ticket = this.#gate.ticket();
    let waited = false;
    for (;;) {
      if (sandbox && this.#generations.resetting(orgId)) {
        waited = true;
        await this.#generations.quiet(orgId);
      }
      if (!this.#gate.tryTake(orgId, weight)) {
        waited = true;
        await this.#gate.take(orgId, weight, ticket);
      }
      if (!sandbox || !this.#generations.resetting(orgId)) break;
      this.#gate.give(weight);
    }
    let given = false;
    return {
      waited,
      release: () => {
        if (given) return;
        given = true;
        this.#gate.give(weight);
      },
    };
  }
}
