// One boot upgrade's walk over a whole table: entries read in passes of a bounded size, outside any
// transaction (a range read inside one that writes to the same table is unspecified: ledger.ts),
// and each pass's writes made in one durable transaction. A crash between passes leaves what was
// written; the upgrades that use it are idempotent, so the next boot walks again.

import { durably } from './durable-write.ts';
import type { LedgerKey, LedgerKeyPart, LedgerRoot, LedgerTable } from './ledger.ts';

/**
 * Reads every entry of `table` in key order, `passSize` at a time; `pick` keeps what an entry's
 * writes need (or nothing: undefined), so a pass holds only that, and `write` puts each pick of a
 * pass inside that pass's transaction (none is opened for a pass that picked nothing). Resolves with how many
 * entries were read, once the last write is durable. Keys must end in a string part.
 */
export async function passesOverTable<P>(
  root: LedgerRoot,
  table: LedgerTable,
  passSize: number,
  pick: (key: LedgerKey, value: unknown) => P | undefined,
  write: (picked: P) => void,
): Promise<number> {
  let read = 0;
  let start: LedgerKey = [];
  for (;;) {
    const picked: P[] = [];
    let last: LedgerKey | undefined;
    for (const { key, value } of table.getRange({ start, limit: passSize })) {
      last = key;
      read++;
      const kept = pick(key, value);
      if (kept !== undefined) picked.push(kept);
    }
    if (last === undefined) return read;
    if (picked.length > 0) await durably(root, root.transaction(() => picked.forEach(write)));
    const parts = last as LedgerKeyPart[];
    start = [...parts.slice(0, -1), `${String(parts.at(-1))}\u0000`];
  }
}
