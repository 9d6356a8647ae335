// The derived-event budget of a root event (1,000, all generations together) for steps in flight.
// The count on disk grows only when a step's completion commits, and many runs of one root can
// have their actions answered before any of them commits: each read the same count, and all
// derived their event (8 runs at 999 made 1,007). A step whose output derives an event takes a
// place here when it passes the check and holds it until its completion has been written or has
// failed to be; the check counts the places held with the count on disk.

import { orgScopedKey } from '../tenancy/org-scoped-key.ts';

export class DerivedBudget {
  readonly #held = new Map<string, number>();
  readonly #max: number;
  /** Events derived from the root as stored (its derived-counts record). */
  readonly #stored: (orgId: string, rootEventId: string) => number;

  constructor(max: number, stored: (orgId: string, rootEventId: string) => number) {
    this.#max = max;
    this.#stored = stored;
  }

  /** A hold for one step attempt: `take` once its output derives an event, `release` once its completion's write has settled. */
  hold(orgId: string, rootEventId: string): DerivedHold {
    const key = orgScopedKey(orgId, rootEventId);
    let taken = false;
    return {
      take: () => {
        if (taken) return true;
        const held = this.#held.get(key) ?? 0;
        if (this.#stored(orgId, rootEventId) + held >= this.#max) return false;
        this.#held.set(key, held + 1);
        taken = true;
        return true;
      },
      release: () => {
        if (!taken) return;
        taken = false;
        const held = (this.#held.get(key) ?? 1) - 1;
        if (held <= 0) this.#held.delete(key);
        else this.#held.set(key, held);
      },
    };
  }

  /** Places held now, all roots together (tests). */
  get held(): number {
    let sum = 0;
    for (const n of this.#held.values()) sum += n;
    return sum;
  }
}

export interface DerivedHold {
  /** True, holding a place, when the root has room for one more derived event; false when its budget is used up. */
  readonly take: () => boolean;
  readonly release: () => void;
}
