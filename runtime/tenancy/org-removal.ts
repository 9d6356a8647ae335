// Removes every record of one org from every table the runtime has opened (org-fence.ts knows them
// and where each keeps its org): the ranges that start with the org, and the org's entries in the
// tables ordered by time or keyed by a hash, which are read whole. In transactions of at most
// `chunk` records, each durable before the next, with an event-loop turn between reads, so other
// orgs' requests go on meanwhile. Idempotent: a removal cut short is run again from the start.

import { setImmediate as nextTurn } from 'node:timers/promises';
import { durably } from '../ledger/durable-write.ts';
import type { LedgerKey, LedgerRoot } from '../ledger/ledger.ts';
import { orgOfRecord, type OrgTable } from '../ledger/org-fence.ts';
import { sameKey } from '../ledger/range-in-turns.ts';

/** Records removed per transaction, and keys read per turn in the tables read whole. */
export const REMOVAL_CHUNK = 1_000;

export interface OrgRemovalDeps {
  readonly root: LedgerRoot;
  readonly tables: () => readonly OrgTable[];
  readonly chunk?: number;
  /** Aborted as the runtime stops: the removal ends between its writes (the next start runs it again). */
  readonly stop?: AbortSignal;
  /**
   * Told of each chunk inside the transaction that removes it, with how many it removed: a tally
   * written there is durable with the removal, so a stop or a crash part-way loses none of it.
   */
  readonly counted?: (table: string, removed: number) => void;
}

/** Removes the org's records; resolves with how many each table held (tables that held none are left out). */
export async function removeOrgRecords(deps: OrgRemovalDeps, orgId: string): Promise<Record<string, number>> {
  const removed: Record<string, number> = {};
  for (const table of fencedTables(deps.tables)) {
    const count = await walkOrgKeys(table, orgId, deps.chunk ?? REMOVAL_CHUNK, deps.stop, (keys) => removeKeys(deps.root, table, keys, deps.counted));
    if (count > 0) removed[table.name] = count;
  }
  return removed;
}

/** How many records of the org each table holds (tables that hold none are left out); read in turns, as the removal reads. */
export async function countOrgRecords(tables: () => readonly OrgTable[], orgId: string, stop?: AbortSignal): Promise<Record<string, number>> {
  const counted: Record<string, number> = {};
  for (const table of fencedTables(tables)) {
    const count = await walkOrgKeys(table, orgId, REMOVAL_CHUNK, stop, async (keys) => keys.length);
    if (count > 0) counted[table.name] = count;
  }
  return counted;
}

/** The tables that hold orgs' records, in name order. */
const fencedTables = (tables: () => readonly OrgTable[]): OrgTable[] => [...tables()].filter(({ place }) => place !== 'none').sort((a, b) => (a.name < b.name ? -1 : 1));

/**
 * Hands `each` the keys of the org's records in the table, at most `chunk` at a time, with an
 * event-loop turn between reads; resolves with the sum of what `each` answers. Where the org leads
 * the key, only its range is read; elsewhere (keys by time, or by hash with the org in the value)
 * the whole table, keys alone unless the org is in the value. Each read starts at the last key of
 * the one before, passed over when it is still there (`each` may have removed it).
 */
async function walkOrgKeys(table: OrgTable, orgId: string, chunk: number, stop: AbortSignal | undefined, each: (keys: LedgerKey[]) => Promise<number>): Promise<number> {
  const { place } = table;
  let count = 0;
  let after: LedgerKey | undefined;
  for (;;) {
    stop?.throwIfAborted();
    const limit = chunk + (after === undefined ? 0 : 1);
    const start = after ?? (place === 'first' ? [orgId] : undefined);
    const range = { ...(start === undefined ? {} : { start }), limit };
    const entries = place === 'value' ? table.table.getRange(range) : [...table.table.getKeys(range)].map((key) => ({ key, value: undefined as unknown }));
    const keys: LedgerKey[] = [];
    /** Keys read but `after`: at most `chunk` (the read takes one more in case `after` was removed). */
    let read = 0;
    let last: LedgerKey | undefined;
    let pastRange = false;
    for (const { key, value } of entries) {
      if (after !== undefined && sameKey(key, after)) continue;
      if (read === chunk) break;
      read++;
      const org = orgOfRecord(place, key, value);
      // The org's range ends at the first key of another org.
      if (place === 'first' && org !== orgId) {
        pastRange = true;
        break;
      }
      last = key;
      if (org === orgId) keys.push(key);
    }
    if (keys.length > 0) count += await each(keys);
    if (pastRange || read < chunk || last === undefined) return count;
    after = last;
    await nextTurn();
  }
}

async function removeKeys(root: LedgerRoot, { name, table }: OrgTable, keys: readonly LedgerKey[], counted: OrgRemovalDeps['counted']): Promise<number> {
  return durably(
    root,
    root.transaction(() => {
      let removed = 0;
      for (const key of keys) {
        if (!table.doesExist(key)) continue;
        table.remove(key);
        removed++;
      }
      if (removed > 0) counted?.(name, removed);
      return removed;
    }),
  );
}
