// How many simulations an org may have running in the hook-runner at once. A run's custom action
// steps are bounded by the org's max_concurrent_runs, but simulate is a plain API call: without a
// bound, one org's many slow guests would fill the runner's guest slots (first come, first served)
// and hold back every other org's runs.

import { KeyedCounts } from '../../actors/keyed-counts.ts';
import { SluiceError } from '../errors.ts';

/** Simulations one org may have running at once. */
export const SIMULATIONS_PER_ORG = 4;

/** Too many of the org's simulations are running: retry once one has finished. */
export class TooManySimulationsError extends SluiceError {
  readonly retryAfterMs = 1000;
  constructor() {
    super(429, 'too_many_simulations', `At most ${SIMULATIONS_PER_ORG} simulations of an organization run at once; retry when one has finished.`);
  }
}

export class SimulationSlots {
  readonly #running = new KeyedCounts();

  /** Runs `simulate` in one of the org's slots, or refuses at once (429) when all are taken. */
  async run<T>(orgId: string, simulate: () => Promise<T>): Promise<T> {
    if (this.#running.get(orgId) >= SIMULATIONS_PER_ORG) throw new TooManySimulationsError();
    this.#running.add(orgId);
    try {
      return await simulate();
    } finally {
      this.#running.subtract(orgId);
    }
  }
}
