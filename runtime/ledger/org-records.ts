// The records one org keeps in a table keyed [orgId, name] (sources, devices, schedules), in name
// order, read lazily: a list page reads only as far as it answers, not every record of the org.
// Their names alone are read without decoding a value; whole tables and orgs' records can be read
// one at a time from their keys, so a reader that awaits between records holds no LMDB snapshot.

import { setImmediate as nextTurn } from 'node:timers/promises';
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
function orgNames(table: LedgerTable, orgId: string): string[] {
  return [...table.getKeys({ start: [orgId], end: [orgId, '\uffff'] })].map((key) => String((key as readonly unknown[])[1]));
}

/** `read(name)` of each of the org's records, one per event-loop turn (names it answers undefined for are passed over). */
export async function* orgRecordsInTurns<T>(table: LedgerTable, orgId: string, read: (name: string) => T | undefined): AsyncGenerator<T> {
  for (const name of orgNames(table, orgId)) {
    const record = read(name);
    if (record !== undefined) yield record;
    await nextTurn();
  }
}

/** Every record of the table, read one at a time as iterated: keys first, so iterating across awaits holds no snapshot. */
export function* everyRecord<T>(table: LedgerTable): Generator<T> {
  for (const key of [...table.getKeys({})]) {
    const record = table.get(key) as T | undefined;
    if (record !== undefined) yield record;
  }
}
