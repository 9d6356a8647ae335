// The guest slots, shared among tenants in turn. Guests run on a few libuv threads; a queue in
// arrival order let one org with many slow invocations (each up to its fuel) hold every other
// org's calls behind all of its own. Waiting calls queue per org (tenant-queue.ts), and a freed
// slot goes to the next org in turn, so another org's call waits for at most one call of each org
// ahead of it.

import { createSlotGate, type SlotGate } from './slot-gate.ts';
import { TenantQueue } from './tenant-queue.ts';

/** The guest slots: `run(tenant, task)`. */
export type TenantTurns = SlotGate<string>;

export function createTenantTurns(slots: number): TenantTurns {
  const waiting = new TenantQueue<() => void>();
  return createSlotGate<string>(slots, {
    push: (tenant, resume) => waiting.push(tenant, resume),
    next: () => waiting.shift(),
    get size() {
      return waiting.size;
    },
  });
}
