// Read-modify-write of one record inside the write that stores it: a change (or a removal) applied
// to the record as stored when the write runs, not as read before, so concurrent updates all land
// and none lands on another record made under the key meanwhile.

import { durably } from './durable-write.ts';
import type { LedgerKey, LedgerRoot, LedgerTable } from './ledger.ts';

/**
 * Stores `change(current)` at `key` in one durable transaction and resolves with it; undefined,
 * writing nothing, when there is no record or `change` answers undefined (the record stored is not
 * the one the caller read: deleted and made again under its key while the caller waited).
 */
export function changeRecord<T>(root: LedgerRoot, table: LedgerTable, key: LedgerKey, change: (current: T) => T | undefined): Promise<T | undefined> {
  return durably(
    root,
    root.transaction(() => {
      const current = table.get(key) as T | undefined;
      if (current === undefined) return undefined;
      const next = change(current);
      if (next === undefined) return undefined;
      table.put(key, next);
      return next;
    }),
  );
}

/**
 * Removes the record at `key` in one durable transaction when `meant(stored)` says it is the one the
 * caller read; resolves false, removing nothing, when there is none or another holds the key now.
 */
export function removeRecord<T>(root: LedgerRoot, table: LedgerTable, key: LedgerKey, meant: (stored: T) => boolean): Promise<boolean> {
  return durably(
    root,
    root.transaction(() => {
      const stored = table.get(key) as T | undefined;
      if (stored === undefined || !meant(stored)) return false;
      table.remove(key);
      return true;
    }),
  );
}
