// The Idempotency-Key a workflow was created with, so a retried or double-clicked POST /workflows
// makes one workflow (two would start two runs per event). A key names its workflow for as long as
// the workflow exists; deleting the workflow frees it. At most one key per workflow, so the table
// is bounded by the org's workflow cap.
//
//   workflow-create-keys  [orgId, 'key', idempotencyKey] -> workflowId
//                         [orgId, 'workflow', workflowId] -> idempotencyKey

import type { Ledger, LedgerTable } from '../ledger/ledger.ts';

export class WorkflowCreateKeys {
  readonly #keys: LedgerTable;

  constructor(ledger: Ledger) {
    this.#keys = ledger.openDatabase('workflow-create-keys');
  }

  /** The workflow `key` created in this org, if it still exists. */
  workflowOf(orgId: string, key: string): string | undefined {
    return this.#keys.get([orgId, 'key', key]) as string | undefined;
  }

  /** Records that `key` created `workflowId`; inside the creating transaction. */
  putWithin(orgId: string, key: string, workflowId: string): void {
    void this.#keys.put([orgId, 'key', key], workflowId);
    void this.#keys.put([orgId, 'workflow', workflowId], key);
  }

  /** Frees the key a deleted workflow was created with; inside the deleting transaction. */
  removeWithin(orgId: string, workflowId: string): void {
    const key = this.#keys.get([orgId, 'workflow', workflowId]) as string | undefined;
    if (key === undefined) return;
    void this.#keys.remove([orgId, 'key', key]);
    void this.#keys.remove([orgId, 'workflow', workflowId]);
  }
}
