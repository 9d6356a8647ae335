// Read-modify-write of one record inside the write that stores it: a change applied to the record
// as stored when the write runs, not as read before, so concurrent updates all land.

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
