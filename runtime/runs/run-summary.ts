// The short form of a run used in run lists, failed events and an event's reactions.
// The full explanation of a run (every attempt) is `describeRun` in actors/run-view.ts.

import type { PersistedRun } from '../../actors/run-transition.ts';

export interface RunSummary {
  readonly run_id: string;
  readonly workflow_id: string;
  readonly workflow_version: number;
  readonly event_id: string;
  readonly environment: string;
  readonly state: string;
  readonly error: { readonly code: string; readonly message: string; readonly step_id: string; readonly reason: string } | null;
  readonly created_at: string;
  readonly updated_at: string;
}

export function summarizeRun(run: PersistedRun): RunSummary {
  const ctx = run.context;
  return {
    run_id: ctx.runId,
    workflow_id: ctx.workflowId,
    workflow_version: ctx.workflowVersion,
    event_id: ctx.eventId,
    environment: ctx.environment,
    state: run.value,
    error: ctx.error === null ? null : { code: ctx.error.code, message: ctx.error.message, step_id: ctx.error.stepId, reason: ctx.error.reason },
    created_at: new Date(ctx.createdAt).toISOString(),
    updated_at: new Date(ctx.updatedAt).toISOString(),
  };
}
