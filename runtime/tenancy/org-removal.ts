// Removes every record of one org from every table the runtime has opened (org-fence.ts knows them
// and where each keeps its org): the ranges that start with the org, and the org's entries in the
// tables ordered by time or keyed by a hash, which are read whole. In transactions of at most
// `chunk` records, each durable before the next, with an event-loop turn between reads, so other
// orgs' requests go on meanwhile. Idempotent: a removal cut short is run again from the start.

import { setImmediate as nextTurn } from 'node:timers/promises';
import { durably } from '../ledger/durable-write.ts';
import type { LedgerKey, LedgerRoot, LedgerTable } from '../ledger/ledger.ts';
import { orgOfRecord, type OrgTable } from '../ledger/org-fence.ts';

/** Records removed per transaction, and keys read per turn in the tables read whole. */
export const REMOVAL_CHUNK = 1_000;

export interface OrgRemovalDeps {
  readonly root: LedgerRoot;
  readonly tables: () => readonly OrgTable[];
  readonly chunk?: number;
  /** Aborted as the runtime stops: the removal ends between its writes (the next start runs it again). */
  readonly stop?: AbortSignal;
  /** Told of each table once the org's records in it are removed (durably), with how many there were. */
  readonly onTable?: (name: string, removed: number) => Promise<void>;
}

/** Removes the org's records; resolves with how many each table held (tables that held none are left out). */
export async function removeOrgRecords(deps: OrgRemovalDeps, orgId: string): Promise<Record<string, number>> {
  const chunk = deps.chunk ?? REMOVAL_CHUNK;
  const removed: Record<string, number> = {};
  const tables = [...deps.tables()].filter(({ place }) => place !== 'none').sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const table of tables) {
    const count = table.place === 'first' ? await removeRange(deps, table.table, orgId, chunk) : await removeScattered(deps, table, orgId, chunk);
    if (count === 0) continue;
    removed[table.name] = count;
    await deps.onTable?.(table.name, count);
  }
  return removed;
}

/** The org's range: keys from [orgId] while they start with it. */
async function removeRange(deps: OrgRemovalDeps, table: LedgerTable, orgId: string, chunk: number): Promise<number> {
  let count = 0;
  for (;;) {
    deps.stop?.throwIfAborted();
    const keys: LedgerKey[] = [];
    for (const key of table.getKeys({ start: [orgId], limit: chunk })) {
      if (orgOfRecord('first', key) !== orgId) break;
      keys.push(key);
    }
    if (keys.length === 0) return count;
    count += await removeKeys(deps.root, table, keys);
  }
}

/** A table read whole (keys by time, or by hash with the org in the value), `chunk` entries per turn. */
async function removeScattered(deps: OrgRemovalDeps, { table, place }: OrgTable, orgId: string, chunk: number): Promise<number> {
  let count = 0;
  let start: LedgerKey | undefined;
  for (;;) {
    deps.stop?.throwIfAborted();
    const keys: LedgerKey[] = [];
    let read = 0;
    let last: LedgerKey | undefined;
    const range = { ...(start === undefined ? {} : { start }), limit: chunk };
    // Keys alone where they name the org; values only where the org is in them.
    const entries = place === 'value' ? table.getRange(range) : [...table.getKeys(range)].map((key) => ({ key, value: undefined }));
    for (const { key, value } of entries) {
      read++;
      last = key;
      if (orgOfRecord(place, key, value) === orgId) keys.push(key);
    }
    if (keys.length > 0) count += await removeKeys(deps.root, table, keys);
    if (read < chunk || last === undefined) return count;
    start = last;
    await nextTurn();
  }
}

async function removeKeys(root: LedgerRoot, table: LedgerTable, keys: readonly LedgerKey[]): Promise<number> {
  return durably(
    root,
    root.transaction(() => {
      let removed = 0;
      for (const key of keys) {
        if (!table.doesExist(key)) continue;
        table.remove(key);
        removed++;
      }
      return removed;
    }),
  );
}
