// A ledger that commits nothing while the data dir's disk is below its floor (disk-floor.ts): each
// write, batch and transaction started then is rejected with DiskSpaceLowError before it reaches
// storage (its callback never runs). Writes made inside a batch, ifNoExists or transaction callback
// belong to that (already admitted) group and are not checked again (top-level-writes.ts), so a
// group is never cut in half.

import type { DiskFloor } from '../../hook-runner/disk-floor.ts';
import type { Ledger, LedgerTable, LedgerWrite } from './ledger.ts';
import { TopLevelWrites } from './top-level-writes.ts';

/** Puts the floor in front of every write of `ledger` (its tables are changed in place); returns it. */
export function flooredLedger(ledger: Ledger, floor: DiskFloor): Ledger {
  // Every write a ledger starts answers a promise (LedgerWrite): a refused one is a rejected promise.
  const writes = new TopLevelWrites(<T>(issue: () => T): T => {
    const error = floor.refusal();
    return error === undefined ? issue() : (Promise.reject(error) as T);
  });
  // The memory twin answers the same table for the same name again: it is floored once.
  const flooredTables = new WeakSet<LedgerTable>();
  const floored = (table: LedgerTable): LedgerTable => {
    if (flooredTables.has(table)) return table;
    flooredTables.add(table);
    return writes.table(table);
  };
  const { root, openDatabase } = ledger;
  const { transaction, batch } = root;
  Object.assign(root, {
    transaction: <T>(body: () => T): LedgerWrite<T> => writes.write(() => transaction.call(root, writes.within(body)) as LedgerWrite<T>),
    batch: (group: () => void) => writes.write(() => batch.call(root, writes.within(group))),
  });
  for (const value of Object.values(ledger)) if (isTable(value)) floored(value);
  return Object.assign(ledger, { openDatabase: (name: string) => floored(openDatabase.call(ledger, name)) });
}

const isTable = (value: unknown): value is LedgerTable =>
  typeof value === 'object' && value !== null && typeof (value as LedgerTable).put === 'function' && typeof (value as LedgerTable).ifNoExists === 'function';
