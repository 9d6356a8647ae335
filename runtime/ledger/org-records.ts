// The records one org keeps in a table keyed [orgId, name] (sources, devices, schedules), in name
// order, read lazily: a list page reads only as far as it answers, not every record of the org.
// Their names alone are read without decoding a value.

import type { LedgerTable } from './ledger.ts';

/** The org's records by name, after `afterName` when given. */
export function* orgRecords<T>(table: LedgerTable, orgId: string, afterName?: string): Generator<T> {
  for (const { key, value } of table.getRange({ start: afterName === undefined ? [orgId] : [orgId, afterName], end: [orgId, '\uffff'] })) {
    // The range starts at the cursor's own key, which the previous page already answered.
    if (afterName !== undefined && (key as readonly unknown[])[1] === afterName) continue;
    yield value as T;
  }
}

/** The names of the org's records, in order: keys only (no value is decoded), read whole. */
export function orgNames(table: LedgerTable, orgId: string): string[] {
  return [...table.getKeys({ start: [orgId], end: [orgId, '\uffff'] })].map((key) => String((key as readonly unknown[])[1]));
}
