// Deleted workflows, until their versions go. A delete keeps a workflow's versions and signing
// secrets for the runs that pin them (explain, resume, a retry's signature), which left them for
// good: a create, patch and delete loop grew an org without end. Each delete is listed here; once
// the retention period has passed since (its runs' events are pruned by then) and no run of the org
// names the workflow any more, its versions, secrets and entry are removed. A workflow still named
// (a failed run waiting for a person keeps its event) is looked at again a day later.
//
//   workflows-deleted   [orgId, workflowId]  ->  [deletedAtMs, nextCheckAtMs]
//
// No new run can name a deleted workflow: its trigger entry goes with it, ids are never reused, a
// replay names only listening workflows and a resume keeps its run.

import { durably } from '../ledger/durable-write.ts';
import { rangeInTurns } from '../ledger/range-in-turns.ts';
import type { Ledger, LedgerKey, LedgerTable } from '../ledger/ledger.ts';
import { versionSize, type OrgVersionBytes } from './version-bytes.ts';
import type { WorkflowVersion } from './workflow-types.ts';

export const DELETED_WORKFLOWS = 'workflows-deleted';
/** How long a deleted workflow that a run still names waits before it is looked at again. */
export const RECHECK_MS = 24 * 60 * 60 * 1000;
/**
 * Version records removed per transaction: a workflow may hold 1,000 of up to a megabyte each, and
 * each is read (decoded and measured, for the org's version bytes) before it goes.
 */
const REMOVE_PASS = 16;
/** Deleted-workflow entries `due` reads per event-loop turn. */
const DUE_PER_TURN = 1000;

/** The workflow store's tables a delete leaves behind or reads (workflow-store.ts opens them). */
export interface WorkflowTables {
  readonly workflows: LedgerTable;
  readonly versions: LedgerTable;
  readonly secrets: LedgerTable;
}

export interface DeletedWorkflow {
  readonly orgId: string;
  readonly workflowId: string;
}

export class DeletedWorkflows {
  readonly #root: Ledger['root'];
  readonly #deleted: LedgerTable;
  readonly #workflows: LedgerTable;
  readonly #versions: LedgerTable;
  readonly #secrets: LedgerTable;
  readonly #versionBytes: OrgVersionBytes;

  /** `versionBytes` is told of the versions removed, in the transactions that remove them. */
  constructor(ledger: Ledger, tables: WorkflowTables, versionBytes: OrgVersionBytes) {
    this.#root = ledger.root;
    this.#deleted = ledger.openDatabase(DELETED_WORKFLOWS);
    this.#workflows = tables.workflows;
    this.#versions = tables.versions;
    this.#secrets = tables.secrets;
    this.#versionBytes = versionBytes;
  }

  /** Lists a workflow deleted at `atMs`. Call inside the transaction that deletes it. */
  markWithin(orgId: string, workflowId: string, atMs: number): void {
    void this.#deleted.put([orgId, workflowId], [atMs, atMs]);
  }

  /**
   * Lists, as deleted at `atMs`, every workflow that has versions but no record (deleted by a
   * release from before this list); resolves with how many, once durable. Idempotent. Boot calls it
   * for a data dir stamped below DELETED_WORKFLOWS_FORMAT. Reads one key per workflow.
   */
  async listEarlierDeletes(atMs: number): Promise<number> {
    const found: DeletedWorkflow[] = [];
    let start: LedgerKey = [];
    for (;;) {
      const [key] = [...this.#versions.getKeys({ start, limit: 1 })] as [string, string, number][];
      if (key === undefined) break;
      const [orgId, workflowId] = key;
      if (!this.#workflows.doesExist([orgId, workflowId]) && !this.#deleted.doesExist([orgId, workflowId])) found.push({ orgId, workflowId });
      // Past every version of this workflow: versions are numbered from 1 up.
      start = [orgId, workflowId, Number.MAX_SAFE_INTEGER];
    }
    if (found.length > 0) await durably(this.#root, this.#root.transaction(() => found.forEach(({ orgId, workflowId }) => this.markWithin(orgId, workflowId, atMs))));
    return found.length;
  }

  /**
   * Deleted workflows due a look: deleted at or before `deletedBy`, and not put off past `nowMs`.
   * Read DUE_PER_TURN entries per event-loop turn: an org creating and deleting workflows in a loop
   * leaves an entry for each until its versions go, and one scan of them all held every request.
   */
  async due(deletedBy: number, nowMs: number, perTurn = DUE_PER_TURN): Promise<DeletedWorkflow[]> {
    const due: DeletedWorkflow[] = [];
    for await (const { key, value } of rangeInTurns(this.#deleted, {}, perTurn)) {
      const [orgId, workflowId] = key as [string, string];
      const [deletedAt, checkAt] = value as [number, number];
      if (deletedAt <= deletedBy && checkAt <= nowMs) due.push({ orgId, workflowId });
    }
    return due;
  }

  /** Puts off the next look at a workflow a run still names until `atMs`; resolves once durable. */
  async putOff(workflow: DeletedWorkflow, atMs: number): Promise<void> {
    const key = [workflow.orgId, workflow.workflowId];
    const entry = this.#deleted.get(key) as [number, number] | undefined;
    if (entry === undefined) return;
    await durably(this.#root, this.#root.transaction(() => void this.#deleted.put(key, [entry[0], atMs])));
  }

  /**
   * Removes the workflow's versions (a pass at a time), its signing secrets, then its entry; resolves
   * with how many versions went, once durable. Its entry goes last: a crash midway leaves it listed,
   * and the next prune finishes the job.
   */
  async remove(workflow: DeletedWorkflow, stop?: AbortSignal): Promise<number> {
    const { orgId, workflowId } = workflow;
    let removed = 0;
    for (;;) {
      const entries = [...this.#versions.getRange({ start: [orgId, workflowId, 0], end: [orgId, workflowId, Number.MAX_SAFE_INTEGER], limit: REMOVE_PASS })];
      if (entries.length === 0) break;
      await durably(
        this.#root,
        this.#root.transaction(() => {
          // Only what this transaction removes is subtracted: another removal may have got there first.
          let bytes = 0;
          for (const { key, value } of entries) {
            if (!this.#versions.doesExist(key)) continue;
            void this.#versions.remove(key);
            bytes += versionSize(value as WorkflowVersion);
          }
          this.#versionBytes.subtract(orgId, bytes);
        }),
      );
      removed += entries.length;
      if (stop?.aborted === true) return removed;
    }
    await durably(
      this.#root,
      this.#root.transaction(() => {
        void this.#secrets.remove([orgId, workflowId]);
        void this.#deleted.remove([orgId, workflowId]);
      }),
    );
    return removed;
  }
}

/** The data format (data-format.ts) from which every delete is listed in DELETED_WORKFLOWS. */
export const DELETED_WORKFLOWS_FORMAT = 6;
