// A table's entries in a key range, read a page at a time with an event-loop turn between pages: a
// scan over what may be millions of entries (an org's derived-event counts, every deleted workflow)
// never holds requests up. Each page starts at the last key of the one before, which is passed over
// when it is still there; entries written or removed between pages are seen or not, as it falls.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { LedgerKey, LedgerKeyPart, LedgerRange, LedgerTable } from './ledger.ts';

/** Whether two keys are the same (part by part for arrays). */
export const sameKey = (a: LedgerKey | readonly LedgerKeyPart[], b: LedgerKey | readonly LedgerKeyPart[]): boolean =>
  Array.isArray(a) && Array.isArray(b) ? a.length === b.length && a.every((part, i) => part === b[i]) : a === b;

/** The entries of `range` (its start and end; forward), `perTurn` per event-loop turn. */
export async function* rangeInTurns(table: LedgerTable, range: Pick<LedgerRange, 'start' | 'end'>, perTurn: number): AsyncGenerator<{ key: LedgerKey; value: unknown }> {
  let after: LedgerKey | undefined;
  for (;;) {
    const limit = perTurn + (after === undefined ? 0 : 1);
    const page = [...table.getRange({ ...range, ...(after === undefined ? {} : { start: after }), limit })];
    for (const entry of page) if (after === undefined || !sameKey(entry.key, after)) yield entry;
    if (page.length < limit) return;
    after = page.at(-1)!.key;
    await nextTurn();
  }
}
