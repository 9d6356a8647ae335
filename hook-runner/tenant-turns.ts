// The guest slots, shared among tenants in turn. Guests run on a few libuv threads; a queue in
// arrival order let one org with many slow invocations (each up to its fuel) hold every other
// org's calls behind all of its own. Waiting calls queue per org, and a freed slot goes to the
// next org in turn, so another org's call waits for at most one call of each org ahead of it.

import { createSlotGate, type SlotGate } from './slot-gate.ts';

/** The guest slots: `run(tenant, task)`. */
export type TenantTurns = SlotGate<string>;

export function createTenantTurns(slots: number): TenantTurns {
  /** Each tenant's waiting calls, oldest first; only tenants with some. */
  const waiting = new Map<string, Array<() => void>>();
  /** Tenants with waiting calls, in the order they are served. */
  const turns: string[] = [];
  let size = 0;
  return createSlotGate<string>(slots, {
    push: (tenant, resume) => {
      const queue = waiting.get(tenant);
      if (queue === undefined) {
        waiting.set(tenant, [resume]);
        turns.push(tenant);
      } else queue.push(resume);
      size += 1;
    },
    next: () => {
      const tenant = turns.shift();
      if (tenant === undefined) return undefined;
      const queue = waiting.get(tenant) as Array<() => void>;
      const resume = queue.shift();
      if (queue.length > 0) turns.push(tenant);
      else waiting.delete(tenant);
      size -= 1;
      return resume;
    },
    get size() {
      return size;
    },
  });
}
