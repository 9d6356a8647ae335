// Where each table keeps the org a record belongs to, and a fence that refuses every write for an
// org being deleted. Every table the runtime opens goes through here, so an org's removal
// (tenancy/org-removal.ts) can walk all of them without a list of its own that could miss one.
//
// The fence closes for an org before the write that marks its deletion is queued: a write made
// after that (a request that passed its org check just before) is refused with OrgDeletedError
// instead of landing behind the removal, where nothing would ever remove it. Removes always go
// through: the removal is made of them.

import { DELETION_PENDING_RETRY_MS, SluiceError } from '../errors.ts';
import type { Ledger, LedgerKey, LedgerTable, LedgerWrite } from './ledger.ts';
import { TopLevelWrites } from './top-level-writes.ts';

/** Where a table's records name their org. */
export type OrgPlace =
  /** [orgId, ...]: an org's records are one contiguous range. */
  | 'first'
  /** [atMs, orgId, ...]: time-ordered for pruning; an org's records are spread over the table. */
  | 'second'
  /** [hash] -> {org_id}: a lookup by a secret's hash (api-keys). */
  | 'value'
  /** Records of the whole runtime (the data format, the boot record, the deletions themselves). */
  | 'none';

const PLACES: Readonly<Record<string, OrgPlace>> = {
  'inbox-by-time': 'second',
  'projections-appended': 'second',
  'api-keys': 'value',
  'data-format': 'none',
  'runtime-boots': 'none',
  'deleted-orgs': 'none',
};

/** The Ledger's own tables by their names (open-ledger.ts, memory-ledger.ts). */
const NAMED: Readonly<Record<string, string>> = {
  orgs: 'orgs',
  apiKeys: 'api-keys',
  apiKeysByOrg: 'api-keys-by-org',
  sources: 'sources',
  events: 'events',
  eventsByTime: 'events-by-time',
  inbox: 'inbox',
  inboxByTime: 'inbox-by-time',
  recordings: 'recordings',
};

/** The orgs deleted, or whose deletion is under way (tenancy/deleted-orgs.ts): what code that writes for many orgs at once passes over. */
export interface DeletedOrgIds {
  has(orgId: string): boolean;
}

/**
 * The same, and for an org whose deletion is being written (fenced off, not yet marked): what
 * settles once that write has, whether it went through or failed (the org is back then).
 */
export interface DeletingOrgIds extends DeletedOrgIds {
  marking(orgId: string): Promise<void> | undefined;
}

export interface OrgTable {
  readonly name: string;
  readonly table: LedgerTable;
  readonly place: OrgPlace;
}

/** The org a record of a table in `place` belongs to, if it names one. */
export function orgOfRecord(place: OrgPlace, key: LedgerKey, value?: unknown): string | undefined {
  const at = place === 'first' ? 0 : place === 'second' ? 1 : undefined;
  if (at !== undefined) {
    const part = Array.isArray(key) ? key[at] : at === 0 ? key : undefined;
    return typeof part === 'string' ? part : undefined;
  }
  if (place === 'value' && typeof value === 'object' && value !== null) {
    const org = (value as { org_id?: unknown }).org_id;
    return typeof org === 'string' ? org : undefined;
  }
  return undefined;
}

/**
 * A write for an org that is being, or has been, deleted: answered as the org's requests are from
 * then on (404), or, while its mark is still being written (`pending`), as a 503 to send again in a
 * second: should the mark fail, the org stays, and what was sent then is taken when sent again.
 */
export class OrgDeletedError extends SluiceError {
  readonly orgId: string;
  /** Set while the mark is written: a Retry-After for the request's answer, a message's nack. */
  readonly retryAfterMs: number | undefined;
  constructor(orgId: string, pending = false) {
    if (pending) super(503, 'organization_deletion_pending', 'The organization is being deleted: this write was refused. Should its deletion fail, send it again.');
    else super(404, 'not_found', 'Organization was not found.', { field: 'org_id' });
    this.orgId = orgId;
    this.retryAfterMs = pending ? DELETION_PENDING_RETRY_MS : undefined;
  }
}

/**
 * Whether the org's deletion is written: fenced off, its mark no longer being written (while it is,
 * the mark may yet fail and the org stay).
 */
export function deletionWritten(deleted: DeletingOrgIds | undefined, orgId: string): boolean {
  return deleted?.has(orgId) === true && deleted.marking(orgId) === undefined;
}

/**
 * Whether `error` is the fence's refusal of a write for an org whose deletion went through. A mark
 * still being written is waited for: should it fail, the org is back, and the refused write is to be
 * tried again as any failed write is.
 */
export async function refusedForDeletion(error: unknown, deleted: DeletingOrgIds | undefined): Promise<boolean> {
  if (!(error instanceof OrgDeletedError)) return false;
  await deleted?.marking(error.orgId);
  return deleted === undefined || deleted.has(error.orgId);
}

/**
 * Puts the fence in front of every table of `ledger` (changed in place, as floored-ledger.ts does)
 * and answers the tables it has seen, opened now or later.
 */
export function fenceOrgWrites(ledger: Ledger, isDeleted: (orgId: string) => boolean, isMarking: (orgId: string) => boolean = () => false): () => readonly OrgTable[] {
  const tables = new Map<string, OrgTable>();
  // Inside a group's callback a refusal throws, so the group is taken back (a transaction) or ends
  // there (a batch: its writes are one org's, and the first one is refused); outside, the write's
  // promise rejects, as a failed write's does.
  const writes = new TopLevelWrites((issue) => issue());
  const refuse = (error: OrgDeletedError): LedgerWrite<boolean> => {
    if (writes.insideGroup) throw error;
    return Promise.reject(error);
  };
  // A batch's or ifNoExists's callback runs when it is made: its refusal is answered as the group's
  // rejected promise, not thrown at whoever made the group.
  const settled = <T>(group: () => LedgerWrite<T>): LedgerWrite<T> => {
    try {
      return group();
    } catch (error) {
      if (error instanceof OrgDeletedError) return Promise.reject(error);
      throw error;
    }
  };
  const { root } = ledger;
  const { transaction, batch } = root;
  Object.assign(root, {
    transaction: <T>(body: () => T): LedgerWrite<T> => transaction.call(root, writes.within(body)) as LedgerWrite<T>,
    batch: (group: () => void) => settled(() => batch.call(root, writes.within(group))),
  });
  // A table opened again under its name may be another object (lmdb-js): each is fenced once.
  const fencedTables = new WeakSet<LedgerTable>();
  const fenced = (name: string, table: LedgerTable): LedgerTable => {
    const place = PLACES[name] ?? 'first';
    if (!tables.has(name)) tables.set(name, { name, table, place });
    if (place === 'none' || fencedTables.has(table)) return table;
    fencedTables.add(table);
    const refusal = (key: LedgerKey, value?: unknown): OrgDeletedError | undefined => {
      const org = orgOfRecord(place, key, value);
      return org !== undefined && isDeleted(org) ? new OrgDeletedError(org, isMarking(org)) : undefined;
    };
    const { put, ifNoExists } = table;
    return Object.assign(table, {
      put: (key: LedgerKey, value: unknown): LedgerWrite<boolean> => {
        const error = refusal(key, value);
        return error === undefined ? put.call(table, key, value) : refuse(error);
      },
      ifNoExists: (key: LedgerKey, group: () => void): LedgerWrite<boolean> => {
        const error = refusal(key);
        return error === undefined ? settled(() => ifNoExists.call(table, key, writes.within(group))) : refuse(error);
      },
    });
  };
  for (const [property, name] of Object.entries(NAMED)) fenced(name, (ledger as unknown as Record<string, LedgerTable>)[property] as LedgerTable);
  const { openDatabase } = ledger;
  Object.assign(ledger, { openDatabase: (name: string) => fenced(name, openDatabase.call(ledger, name)) });
  return () => [...tables.values()];
}
