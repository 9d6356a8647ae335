// A sandbox reset of one org held open in a test runtime: the org is `resetting` until `finish`, so
// requests that wait out a reset (sandbox events, replays) wait there, and `waitingFor` counts them.

import type { TestRuntime } from './runtime.ts';
import { eventually } from './receiver.ts';

export interface HeldReset {
  /** Resolves once `count` requests have reached the wait for the reset. */
  waitingFor(count: number): Promise<void>;
  /** Lets the reset settle; resolves once it has. */
  finish(): Promise<void>;
}

export function holdReset(rt: TestRuntime, orgId: string): HeldReset {
  const generations = rt.runtime.context.runs.sandboxGenerations;
  let release!: () => void;
  const held = generations.during(orgId, () => new Promise<void>((resolve) => (release = resolve)));
  let waiting = 0;
  const quiet = generations.quiet.bind(generations);
  generations.quiet = (id: string) => {
    waiting++;
    return quiet(id);
  };
  return {
    waitingFor: async (count) => {
      try {
        await eventually(`${count} requests waiting for the reset`, () => waiting, (n) => n === count);
      } finally {
        generations.quiet = quiet;
      }
    },
    finish: async () => {
      release();
      await held;
    },
  };
}
