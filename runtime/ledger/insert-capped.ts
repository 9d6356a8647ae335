// Inserting a named record into an org's share of a table that holds at most so many per org: the
// existence check, the count and the write in one durable transaction, so two racing inserts can
// neither both take the name nor both take the last place.

import { durably } from './durable-write.ts';
import type { LedgerRoot, LedgerTable } from './ledger.ts';

/** Stores `value` at [orgId, name] unless that key exists or the org already has `max` keys; resolves once durable with what happened. */
export function insertCapped(root: LedgerRoot, table: LedgerTable, orgId: string, name: string, value: unknown, max: number): Promise<'created' | 'exists' | 'full'> {
  return durably(
    root,
    root.transaction(() => {
      if (table.get([orgId, name]) !== undefined) return 'exists';
      if (table.getKeysCount({ start: [orgId], end: [orgId, '\uffff'] }) >= max) return 'full';
      table.put([orgId, name], value);
      return 'created';
    }),
  );
}
