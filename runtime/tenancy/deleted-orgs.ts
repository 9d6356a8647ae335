// The record of every deleted organization, kept for good: an org id is never used again, since
// run ids, effect keys and the hook-runner's fences and records are made from it. Table
// `deleted-orgs`: [orgId] -> DeletionRecord. The ids are held in memory as well (the write fence of
// org-fence.ts asks on every write); an org's id joins them before the write that marks its
// deletion is queued, and `marking` tells until that write has settled.

import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerTable } from '../ledger/ledger.ts';
import { fenceOrgWrites, type DeletingOrgIds, type OrgTable } from '../ledger/org-fence.ts';

export interface DeletionRecord {
  readonly organization_id: string;
  readonly requested_at: string;
  /** `removing` until every record of the org is gone from the ledger and the hook-runner's part is done. */
  readonly state: 'removing' | 'removed';
  readonly removed_at: string | null;
  /** The org's custom actions while the hook-runner's part is pending (ForgetOrg; a runner without it: deleting their secrets); empty once done. */
  readonly actions_with_secrets: readonly string[];
  /** Records removed so far, by table. */
  readonly removed: Readonly<Record<string, number>>;
}

export class DeletedOrgs implements DeletingOrgIds {
  readonly #table: LedgerTable;
  readonly #root: Ledger['root'];
  readonly #ids = new Set<string>();
  /** The ids whose removal is not finished (read once at start; the records are read only for these). */
  readonly #unfinished = new Set<string>();
  /** The orgs whose mark is being written (fenced off already): what settles once the write has. */
  readonly #marking = new Map<string, Promise<void>>();

  constructor(ledger: Ledger) {
    this.#root = ledger.root;
    this.#table = ledger.openDatabase('deleted-orgs');
    for (const { key, value } of this.#table.getRange({})) {
      // LMDB reads a one-part key back as the part itself.
      const orgId = String(Array.isArray(key) ? key[0] : key);
      this.#ids.add(orgId);
      if ((value as DeletionRecord).state !== 'removed') this.#unfinished.add(orgId);
    }
  }

  /** Whether the org was deleted, or its deletion is under way: no write of it is taken any more. */
  has(orgId: string): boolean {
    return this.#ids.has(orgId);
  }

  /**
   * While the org's mark is being written: what settles once the write has (the org is deleted
   * then, or back if the write failed); undefined otherwise.
   */
  marking(orgId: string): Promise<void> | undefined {
    return this.#marking.get(orgId);
  }

  get(orgId: string): DeletionRecord | undefined {
    return this.#table.get([orgId]) as DeletionRecord | undefined;
  }

  /** Deletions not finished yet (under way, cut short by a stop or a crash, or waiting for the hook-runner). */
  unfinished(): DeletionRecord[] {
    return [...this.#unfinished].flatMap((orgId) => this.get(orgId) ?? []);
  }

  get unfinishedCount(): number {
    return this.#unfinished.size;
  }

  /**
   * Fences the org off, then writes `record` and `alsoWrite()`'s writes in one durable transaction;
   * resolves false, writing nothing, when `proceed()` (run inside it) says no. A write that fails
   * lifts the fence again, unless its commit went through (only its flush failed).
   */
  async mark(record: DeletionRecord, proceed: () => boolean, alsoWrite: () => void): Promise<boolean> {
    const orgId = record.organization_id;
    if (this.#ids.has(orgId)) return false;
    this.#ids.add(orgId);
    let settled: () => void = () => undefined;
    this.#marking.set(orgId, new Promise<void>((resolve) => (settled = resolve)));
    let marked = false;
    try {
      marked = await durably(
        this.#root,
        this.#root.transaction(() => {
          if (!proceed()) return false;
          this.#table.put([orgId], record);
          alsoWrite();
          return true;
        }),
      );
      return marked;
    } finally {
      if (!marked && this.#table.get([orgId]) === undefined) this.#ids.delete(orgId);
      else this.#unfinished.add(orgId);
      this.#marking.delete(orgId);
      settled();
    }
  }

  /**
   * Adds `count` to the records of `table` the org's record says were removed. Called inside the
   * transaction that removed them, so the tally is durable with them (and taken back with them).
   */
  countRemoved(orgId: string, table: string, count: number): void {
    const record = this.get(orgId);
    if (record === undefined) return;
    this.#table.put([orgId], { ...record, removed: { ...record.removed, [table]: (record.removed[table] ?? 0) + count } });
  }

  /** Replaces the org's record (its progress); resolves once durable. */
  async update(record: DeletionRecord): Promise<void> {
    await durably(this.#root, this.#table.put([record.organization_id], record));
    if (record.state === 'removed') this.#unfinished.delete(record.organization_id);
  }
}

/**
 * Puts the write fence of deleted orgs in front of `ledger` (before any store opens its tables, so
 * each is fenced and known) and reads the deletions: what a process opening the ledger does first.
 */
export function fenceDeletedOrgs(ledger: Ledger): { readonly deleted: DeletedOrgs; readonly tables: () => readonly OrgTable[] } {
  let deleted: DeletedOrgs | undefined;
  const tables = fenceOrgWrites(
    ledger,
    (orgId) => deleted?.has(orgId) === true,
    (orgId) => deleted?.marking(orgId) !== undefined,
  );
  deleted = new DeletedOrgs(ledger);
  return { deleted, tables };
}
