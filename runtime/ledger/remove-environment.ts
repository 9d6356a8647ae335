// Removes one org's environment from a table keyed [orgId, environment, ...]: what a sandbox reset
// does to each such table (projection rows, event tombstones).

import type { LedgerTable } from './ledger.ts';

/** Removes every key under [orgId, environment]; returns how many. Call inside a write transaction. */
export function removeEnvironmentKeys(table: LedgerTable, orgId: string, environment: string): number {
  let removed = 0;
  for (const key of table.getKeys({ start: [orgId, environment], end: [orgId, environment, '\uffff'] })) {
    table.remove(key);
    removed++;
  }
  return removed;
}
