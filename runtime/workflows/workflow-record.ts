// Turns a parsed draft into the next stored workflow and its immutable version record.
// Pure: the id, the org and the write time come from the caller (the API handler).

import type { OrgId, WorkflowId } from '../../actors/ids.ts';
import type { Workflow, WorkflowDraft, WorkflowVersion } from './workflow-types.ts';

export interface WorkflowWrite {
  readonly orgId: OrgId;
  readonly workflowId: WorkflowId;
  /** Epoch ms of the write. */
  readonly at: number;
  /** The current workflow on update; absent on create. */
  readonly previous?: Workflow;
}

/**
 * The workflow after this write: version 1 on create, `previous.version + 1` on update.
 * Store it together with `toWorkflowVersion(result)` in one transaction, with the version
 * key including the number, so runs pinned to older versions keep reading theirs.
 */
export function nextWorkflow(draft: WorkflowDraft, write: WorkflowWrite): Workflow {
  if (write.previous !== undefined && (write.previous.id !== write.workflowId || write.previous.org_id !== write.orgId)) {
    throw new Error('nextWorkflow: previous belongs to another workflow');
  }
  const now = new Date(write.at).toISOString();
  return {
    ...draft,
    id: write.workflowId,
    org_id: write.orgId,
    version: (write.previous?.version ?? 0) + 1,
    created_at: write.previous?.created_at ?? now,
    updated_at: now,
  };
}

/** The immutable snapshot of `workflow` at its current version. */
export function toWorkflowVersion(workflow: Workflow): WorkflowVersion {
  const { name, trigger_event, environment, status, steps } = workflow;
  const definition: WorkflowDraft = {
    name,
    trigger_event,
    environment,
    status,
    ...(workflow.channel === undefined ? {} : { channel: workflow.channel }),
    steps,
  };
  return { workflow_id: workflow.id, org_id: workflow.org_id, version: workflow.version, created_at: workflow.updated_at, definition };
}
