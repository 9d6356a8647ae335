// Removes every record of some orgs from every table the runtime has opened (org-fence.ts knows
// them and where each keeps its org): the ranges that start with each org, and their entries in the
// tables ordered by time or keyed by a hash, which are read whole, once for all the orgs given. In
// transactions of at most `chunk` records, each durable before the next, with an event-loop turn
// after every 1,000 keys read, so other orgs' requests go on meanwhile. Idempotent: a removal cut
// short is run again from the start.

import { setImmediate as nextTurn } from 'node:timers/promises';
import { durably } from '../ledger/durable-write.ts';
import type { LedgerKey, LedgerRoot } from '../ledger/ledger.ts';
import { orgOfRecord, type OrgTable } from '../ledger/org-fence.ts';
import { sameKey } from '../ledger/range-in-turns.ts';

/**
 * Records removed per transaction. Small: a large delete commits slowly, and other orgs' writes
 * queue behind it. 1,000 orgs deleted at once (while each read still ran past its org's range) took
 * 19 s in transactions of 1,000, another org's writes waiting up to 2 s; 9 s at 250 (p99 256 ms);
 * 13 s at 100 (p99 80 ms). With lazy reads, 7 s at 100 (p99 168 ms with the deletes' own burst).
 */
export const REMOVAL_CHUNK = 100;
/** Keys read per event-loop turn. */
export const READ_CHUNK = 1_000;

/** Per org given, how many records each table holds or held (tables with none left out). */
export type RecordsByOrg = Map<string, Record<string, number>>;

export interface OrgRemovalDeps {
  readonly root: LedgerRoot;
  readonly tables: () => readonly OrgTable[];
  /** Records removed per transaction (REMOVAL_CHUNK). */
  readonly chunk?: number;
  /** Keys read per turn (READ_CHUNK). */
  readonly readChunk?: number;
  /** Aborted as the runtime stops: the removal ends between its writes (the next start runs it again). */
  readonly stop?: AbortSignal;
  /**
   * Told, inside the transaction that removes them, how many records of a table an org lost: a
   * tally written there is durable with the removal, so a stop or a crash part-way loses none of it.
   */
  readonly counted?: (orgId: string, table: string, removed: number) => void;
}

/** Keys handed on at once (`write`), and read per turn (`read`). */
interface Chunks {
  readonly write: number;
  readonly read: number;
}

/** One record of an org, by its key. */
interface OrgKey {
  readonly orgId: string;
  readonly key: LedgerKey;
}

/** Removes the orgs' records; resolves with how many each org's tables held. */
export async function removeOrgRecords(deps: OrgRemovalDeps, orgIds: readonly string[]): Promise<RecordsByOrg> {
  const chunks = { write: deps.chunk ?? REMOVAL_CHUNK, read: deps.readChunk ?? READ_CHUNK };
  return tallied(deps.tables, orgIds, chunks, deps.stop, (table, keys) => removeKeys(deps.root, table, keys, deps.counted));
}

/** How many records of each org each table holds; read in turns, as the removal reads. */
export async function countOrgRecords(tables: () => readonly OrgTable[], orgIds: readonly string[], stop?: AbortSignal): Promise<RecordsByOrg> {
  return tallied(tables, orgIds, { write: READ_CHUNK, read: READ_CHUNK }, stop, async (_table, keys) => keys);
}

/** Walks every table for the orgs, adding up per org and table the keys `each` answers. */
async function tallied(tables: () => readonly OrgTable[], orgIds: readonly string[], chunks: Chunks, stop: AbortSignal | undefined, each: (table: OrgTable, keys: OrgKey[]) => Promise<readonly OrgKey[]>): Promise<RecordsByOrg> {
  const counts: RecordsByOrg = new Map(orgIds.map((orgId) => [orgId, {}]));
  const orgs = new Set(orgIds);
  for (const table of fencedTables(tables)) {
    await walkOrgKeys(table, orgs, chunks, stop, async (keys) => {
      for (const { orgId } of await each(table, keys)) {
        const count = counts.get(orgId)!;
        count[table.name] = (count[table.name] ?? 0) + 1;
      }
    });
  }
  return counts;
}

/** The tables that hold orgs' records, in name order. */
const fencedTables = (tables: () => readonly OrgTable[]): OrgTable[] => [...tables()].filter(({ place }) => place !== 'none').sort((a, b) => (a.name < b.name ? -1 : 1));

/**
 * Hands `each` the keys of the orgs' records in the table, at most `chunks.write` at a time,
 * taking an event-loop turn after each `chunks.read` keys read. Where the org leads the key, only
 * each org's range is read; elsewhere (keys by time, or by hash with the org in the value) the
 * whole table once, keys alone unless the org is in the value. Each read starts at the last key of
 * the one before, passed over when it is still there (`each` may have removed it).
 */
async function walkOrgKeys(table: OrgTable, orgIds: ReadonlySet<string>, chunks: Chunks, stop: AbortSignal | undefined, each: (keys: OrgKey[]) => Promise<void>): Promise<void> {
  const { place } = table;
  const chunk = chunks.read;
  const pending: OrgKey[] = [];
  /** A stop ends the walk between writes too. */
  const handOn = (keys: OrgKey[]): Promise<void> => {
    stop?.throwIfAborted();
    return each(keys);
  };
  /** Keys read (a read that found none counts one) since the last turn. */
  let readSinceTurn = 0;
  const starts = place === 'first' ? [...orgIds].sort() : [undefined];
  for (const first of starts) {
    let after: LedgerKey | undefined;
    for (;;) {
      stop?.throwIfAborted();
      const limit = chunk + (after === undefined ? 0 : 1);
      const start = after ?? (first === undefined ? undefined : [first]);
      const range = { ...(start === undefined ? {} : { start }), limit };
      // Read lazily: an org's range ends at the first key of another, and reading a whole page past
      // it (a thousand other orgs' keys per org and table) cost most of a removal's time.
      const entries = place === 'value' ? table.table.getRange(range) : keysAsEntries(table.table.getKeys(range));
      /** Keys read but `after`: at most `chunk` (the read takes one more in case `after` was removed). */
      let read = 0;
      let last: LedgerKey | undefined;
      let pastRange = false;
      for (const { key, value } of entries) {
        if (after !== undefined && sameKey(key, after)) continue;
        if (read === chunk) break;
        read++;
        const orgId = orgOfRecord(place, key, value);
        // An org's range ends at the first key of another org.
        if (first !== undefined && orgId !== first) {
          pastRange = true;
          break;
        }
        last = key;
        if (orgId !== undefined && orgIds.has(orgId)) pending.push({ orgId, key });
      }
      while (pending.length >= chunks.write) await handOn(pending.splice(0, chunks.write));
      readSinceTurn += Math.max(read, 1);
      if (readSinceTurn >= chunk) {
        readSinceTurn = 0;
        await nextTurn();
      }
      if (pastRange || read < chunk || last === undefined) break;
      after = last;
    }
  }
  while (pending.length > 0) await handOn(pending.splice(0, chunks.write));
}

function* keysAsEntries(keys: Iterable<LedgerKey>): Generator<{ key: LedgerKey; value: unknown }> {
  for (const key of keys) yield { key, value: undefined };
}

/** Removes the keys still there in one durable transaction; answers those it removed. */
async function removeKeys(root: LedgerRoot, { name, table }: OrgTable, keys: readonly OrgKey[], counted: OrgRemovalDeps['counted']): Promise<OrgKey[]> {
  return durably(
    root,
    root.transaction(() => {
      const removed = keys.filter(({ key }) => table.doesExist(key));
      const perOrg = new Map<string, number>();
      for (const { orgId, key } of removed) {
        table.remove(key);
        perOrg.set(orgId, (perOrg.get(orgId) ?? 0) + 1);
      }
      if (counted !== undefined) for (const [orgId, count] of perOrg) counted(orgId, name, count);
      return removed;
    }),
  );
}
