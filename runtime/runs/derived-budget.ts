// The derived-event budget of a root event (1,000, all generations together) for steps in flight.
// The count on disk grows only when a step's completion commits, and many runs of one root can
// have their actions answered before any of them commits: each read the same count, and all
// derived their event (8 runs at 999 made 1,007). A step whose output derives an event takes a
// place here when it passes the check; the place counts until that event is stored (its commit,
// read as the event existing: the count on disk has it then) or the step lets go of it.

import { orgScopedKey } from '../tenancy/org-scoped-key.ts';

export interface DerivedBudgetReads {
  /** Events derived from the root as stored (its derived-counts record). */
  readonly derivedSoFar: (orgId: string, rootEventId: string) => number;
  readonly eventStored: (orgId: string, eventId: string) => boolean;
}

export class DerivedBudget {
  /**
   * Per org and root, the places held: each names the derived event its step will write
   * (derivedEventId) and ends when that event is stored. One object per hold, so two attempts
   * deriving the same event each hold their own place.
   */
  readonly #places = new Map<string, Set<{ readonly eventId: string }>>();
  readonly #max: number;
  readonly #reads: DerivedBudgetReads;

  constructor(max: number, reads: DerivedBudgetReads) {
    this.#max = max;
    this.#reads = reads;
  }

  /** A hold for one step attempt, whose output would derive `eventId` from the root: `take` at the output check, `release` once its completion's write has settled. */
  hold(orgId: string, rootEventId: string, eventId: string): DerivedHold {
    const key = orgScopedKey(orgId, rootEventId);
    const place = { eventId };
    let taken = false;
    return {
      take: () => {
        // Stored already (the step ran before a crash): writing it again adds nothing.
        if (taken || this.#reads.eventStored(orgId, eventId)) return true;
        const places = this.#places.get(key) ?? new Set();
        let pending = 0;
        for (const other of places) if (!this.#reads.eventStored(orgId, other.eventId)) pending++;
        if (this.#reads.derivedSoFar(orgId, rootEventId) + pending >= this.#max) return false;
        places.add(place);
        this.#places.set(key, places);
        taken = true;
        return true;
      },
      release: () => {
        if (!taken) return;
        taken = false;
        const places = this.#places.get(key);
        places?.delete(place);
        if (places?.size === 0) this.#places.delete(key);
      },
    };
  }
}

export interface DerivedHold {
  /** True (holding a place) when the root has room for one more derived event, or the step's is stored already; false when the budget is used up. */
  readonly take: () => boolean;
  readonly release: () => void;
}
