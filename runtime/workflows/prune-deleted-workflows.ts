// The prune job that lets deleted workflows' versions go (deleted-workflows.ts): those deleted a
// retention period ago or more are looked at per org, one walk over the org's runs for all of
// them; the ones no run names are removed, the others put off for a day.

import { type DeletedOrgIds, OrgDeletedError } from '../ledger/org-fence.ts';
import type { RunStore } from '../runs/run-store.ts';
import { RECHECK_MS, type DeletedWorkflow, type DeletedWorkflows } from './deleted-workflows.ts';

export interface DeletedWorkflowPruneDeps {
  readonly deleted: DeletedWorkflows;
  readonly runs: RunStore;
  /** Deleted orgs: their records go with the org (org-deletion.ts), and take no write meanwhile. */
  readonly deletedOrgs?: DeletedOrgIds;
}

/** What one prune did: workflows whose versions went, the versions, and workflows put off. */
export interface PrunedWorkflows {
  readonly workflows: number;
  readonly versions: number;
  readonly putOff: number;
}

export async function pruneDeletedWorkflows(deps: DeletedWorkflowPruneDeps, nowMs: number, retentionMs: number, stop?: AbortSignal): Promise<PrunedWorkflows> {
  const byOrg = new Map<string, DeletedWorkflow[]>();
  for (const workflow of await deps.deleted.due(nowMs - retentionMs, nowMs)) {
    if (deps.deletedOrgs?.has(workflow.orgId) === true) continue;
    let ofOrg = byOrg.get(workflow.orgId);
    if (ofOrg === undefined) byOrg.set(workflow.orgId, (ofOrg = []));
    ofOrg.push(workflow);
  }
  // A function, so that each check reads the signal afresh (an await lies between them).
  const stopped = (): boolean => stop?.aborted === true;
  let workflows = 0;
  let versions = 0;
  let putOff = 0;
  for (const [orgId, due] of byOrg) {
    const named = await deps.runs.workflowsNamed(orgId, new Set(due.map((workflow) => workflow.workflowId)), stop);
    // A walk cut short by a stop has not seen every run: nothing is removed on its word.
    if (stopped()) break;
    try {
      for (const workflow of due) {
        if (named.has(workflow.workflowId)) {
          await deps.deleted.putOff(workflow, nowMs + RECHECK_MS);
          putOff += 1;
          continue;
        }
        versions += await deps.deleted.remove(workflow, stop);
        workflows += 1;
        if (stopped()) return { workflows, versions, putOff };
      }
    } catch (error) {
      // Deleted while its runs were walked: its workflows go with it (org-deletion.ts); the others' go on.
      if (!(error instanceof OrgDeletedError)) throw error;
    }
  }
  return { workflows, versions, putOff };
}
