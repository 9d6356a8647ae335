// Removes one org's environment from a table keyed [orgId, environment, ...]: what a sandbox reset
// does to each such table (projection rows, event tombstones).

import type { LedgerTable } from './ledger.ts';

/** Removes the keys under [orgId, environment], at most `limit` of them; returns how many. Call inside a write transaction. */
export function removeEnvironmentKeys(table: LedgerTable, orgId: string, environment: string, limit = Number.POSITIVE_INFINITY): number {
  let removed = 0;
  for (const key of table.getKeys({ start: [orgId, environment], end: [orgId, environment, '\uffff'] })) {
    if (removed === limit) break;
    table.remove(key);
    removed++;
  }
  return removed;
}
