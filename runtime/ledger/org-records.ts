// The records one org keeps in a table keyed [orgId, name] (sources, devices, schedules), in name
// order, read lazily: a list page reads only as far as it answers, not every record of the org.

import type { LedgerTable } from './ledger.ts';

/** The org's records by name, after `afterName` when given. */
export function* orgRecords<T>(table: LedgerTable, orgId: string, afterName?: string): Generator<T> {
  for (const { key, value } of table.getRange({ start: afterName === undefined ? [orgId] : [orgId, afterName], end: [orgId, '\uffff'] })) {
    // The range starts at the cursor's own key, which the previous page already answered.
    if (afterName !== undefined && (key as readonly unknown[])[1] === afterName) continue;
    yield value as T;
  }
}
