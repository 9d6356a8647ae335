// A ledger that commits nothing while the data dir's disk is below its floor (disk-floor.ts): each
// write, batch and transaction started then is rejected with DiskSpaceLowError before it reaches
// storage. Writes made inside a batch, ifNoExists or transaction callback belong to that
// (already admitted) group and are not checked again, so a group is never cut in half.

import type { DiskFloor } from '../../hook-runner/disk-floor.ts';
import type { Ledger, LedgerKey, LedgerTable, LedgerWrite } from './ledger.ts';

/** Puts the floor in front of every write of `ledger` (its tables are changed in place); returns it. */
export function flooredLedger(ledger: Ledger, floor: DiskFloor): Ledger {
  /** Callbacks of admitted groups running now: their writes are theirs. */
  let inside = 0;
  const within = <T>(body: () => T) => (): T => {
    inside += 1;
    try {
      return body();
    } finally {
      inside -= 1;
    }
  };
  /** A rejected write when the floor refuses one now (never inside an admitted group's callback). */
  const refused = (): LedgerWrite<never> | undefined => {
    if (inside > 0) return undefined;
    const error = floor.refusal();
    return error === undefined ? undefined : Promise.reject(error);
  };
  // The memory twin answers the same table for the same name again: it is floored once.
  const flooredTables = new WeakSet<LedgerTable>();
  const floored = (table: LedgerTable): LedgerTable => {
    if (flooredTables.has(table)) return table;
    flooredTables.add(table);
    const { put, remove, ifNoExists } = table;
    return Object.assign(table, {
      put: (key: LedgerKey, value: unknown) => refused() ?? put.call(table, key, value),
      remove: (key: LedgerKey) => refused() ?? remove.call(table, key),
      ifNoExists: (key: LedgerKey, writes: () => void) => refused() ?? ifNoExists.call(table, key, within(writes)),
    });
  };
  const { root, openDatabase } = ledger;
  const { transaction, batch } = root;
  Object.assign(root, {
    transaction: <T>(body: () => T): LedgerWrite<T> => refused() ?? (transaction.call(root, within(body)) as LedgerWrite<T>),
    batch: (writes: () => void) => refused() ?? batch.call(root, within(writes)),
  });
  for (const value of Object.values(ledger)) if (isTable(value)) floored(value);
  return Object.assign(ledger, { openDatabase: (name: string) => floored(openDatabase.call(ledger, name)) });
}

const isTable = (value: unknown): value is LedgerTable =>
  typeof value === 'object' && value !== null && typeof (value as LedgerTable).put === 'function' && typeof (value as LedgerTable).ifNoExists === 'function';
