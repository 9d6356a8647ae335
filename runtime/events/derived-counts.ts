// The derived-event budget of each chain (DESIGN: 1,000 events derived from one root event, all
// its descendants together), and how many of those descendants are still stored. Retention prunes
// each event on its own once its runs are done, so a chain's root can go while a descendant still
// works (in a delay, in backoff, failed and resumed later): its count must stay, or the chain's
// budget would start over. A count goes once neither the root nor any descendant is stored.
//
//   derived-counts   [orgId, root event id]  ->  [derived so far, descendants still stored]
//                                                 (a bare number: written before descendants were
//                                                 counted, so how many are stored is unknown: it is
//                                                 kept for good, one small record per such chain
//                                                 until its org goes; read as dropped at the root's
//                                                 removal, it gave a descendant still stored a fresh
//                                                 budget)

import type { Ledger, LedgerTable } from '../ledger/ledger.ts';
import { rangeInTurns } from '../ledger/range-in-turns.ts';
import type { StoredEvent } from './event-record.ts';

/** Count keys read per event-loop turn by rootsNotStored. */
const ROOTS_PER_TURN = 1000;

type Stored = number | readonly [number, number];

/** [derived so far, descendants still stored] (a bare number's descendants are not known: read as none, never removed for it). */
const read = (stored: Stored | undefined): readonly [number, number] => (stored === undefined ? [0, 0] : typeof stored === 'number' ? [stored, 0] : stored);

export class DerivedCounts {
  readonly #counts: LedgerTable;
  readonly #events: LedgerTable;

  constructor(ledger: Ledger) {
    this.#counts = ledger.openDatabase('derived-counts');
    this.#events = ledger.events;
  }

  /** The root's stored count as written (undefined: none). */
  #stored(orgId: string, rootEventId: string): Stored | undefined {
    return this.#counts.get([orgId, rootEventId]) as Stored | undefined;
  }

  /** How many events have been derived from the root (its correlation_id), in all generations. */
  derivedSoFar(orgId: string, rootEventId: string): number {
    return read(this.#stored(orgId, rootEventId))[0];
  }

  /** Counts one more event derived from the root, stored with it; call inside the transaction that writes it. */
  countWithin(orgId: string, rootEventId: string): void {
    const stored = this.#stored(orgId, rootEventId);
    // Uncounted descendants stay uncounted: counting only the new ones would let the count go while others are stored.
    if (typeof stored === 'number') {
      void this.#counts.put([orgId, rootEventId], stored + 1);
      return;
    }
    const [derived, live] = read(stored);
    void this.#counts.put([orgId, rootEventId], [derived + 1, live + 1]);
  }

  /** Keeps the counts in step with an event retention removes; call inside that transaction, after removing it. */
  removedWithin(event: Omit<StoredEvent, 'payload'>): void {
    if (event.correlation_id === event.id) {
      // A root: its count goes unless a descendant is still stored.
      const stored = this.#stored(event.org_id, event.id);
      if (stored !== undefined && typeof stored !== 'number' && stored[1] <= 0) void this.#counts.remove([event.org_id, event.id]);
      return;
    }
    const key = [event.org_id, event.correlation_id];
    const stored = this.#stored(event.org_id, event.correlation_id);
    // Uncounted descendants (a bare number): the count stays as it is.
    if (stored === undefined || typeof stored === 'number') return;
    const [derived, live] = read(stored);
    if (live - 1 <= 0 && !this.#events.doesExist(key)) void this.#counts.remove(key);
    else void this.#counts.put(key, [derived, Math.max(0, live - 1)]);
  }

  /**
   * The roots of `orgId` whose count is kept while the root itself is no longer stored (retention
   * pruned it before a descendant): few, read from the counts alone, ROOTS_PER_TURN keys per
   * event-loop turn (an org keeps a count for every chain that derived an event in the retention).
   */
  async rootsNotStored(orgId: string, perTurn = ROOTS_PER_TURN): Promise<Set<string>> {
    const roots = new Set<string>();
    for await (const { key } of rangeInTurns(this.#counts, { start: [orgId, ''], end: [orgId, '\uffff'] }, perTurn)) {
      const root = (key as [string, string])[1];
      if (!this.#events.doesExist([orgId, root])) roots.add(root);
    }
    return roots;
  }

  /** Forgets a removed root event's count (sandbox reset, which removes its descendants too); call inside a write transaction. */
  forgetWithin(orgId: string, rootEventId: string): void {
    void this.#counts.remove([orgId, rootEventId]);
  }
}
