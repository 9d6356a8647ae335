// The live-room update a persisted run transition publishes: its state, current step and attempt,
// and the workflow's channel. Built from the snapshot alone, before the write that stores it (the
// write gives it its seq). Its error: see errorText.

import type { PersistedRun } from '../../actors/run-transition.ts';
import type { StepAttempt, StepError } from '../../actors/run-types.ts';
import type { NewRunUpdate } from '../rooms/update-log.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';

/**
 * The run's error; while it waits to try a step again (`backoff`, or `queued` for a slot), the
 * failure of the attempt before, so a watcher sees why at once rather than when retries run out.
 */
const errorText = (error: Pick<StepError, 'code' | 'message'> | null): string => (error === null ? '' : `${error.code}: ${error.message}`);

/** The failure of the step's last attempt, unless a person resumed the run after it was claimed (the step then starts afresh). */
function lastFailure(ctx: PersistedRun['context'], attempts: readonly StepAttempt[]): StepError | null {
  const last = attempts.at(-1);
  if (last === undefined) return null;
  const claimedBeforeResume = ctx.resumedAtFence !== undefined ? last.fence <= ctx.resumedAtFence : ctx.resumedAt !== undefined && last.claimedAt <= ctx.resumedAt;
  return claimedBeforeResume ? null : last.error;
}

/** `version` is the run's pinned workflow version when known (its channel names the room's channel). */
export function runUpdateFor(run: PersistedRun, version: WorkflowVersion | undefined): NewRunUpdate {
  const ctx = run.context;
  const step = ctx.steps[Math.min(ctx.currentIndex, ctx.steps.length - 1)];
  const attempts = step?.attempts ?? [];
  return {
    run_id: ctx.runId,
    state: run.value,
    channel: version?.definition.channel ?? '',
    workflow_id: ctx.workflowId,
    event_id: ctx.eventId,
    step_id: step?.id ?? '',
    attempt: attempts.at(-1)?.attempt ?? 0,
    at_ms: ctx.updatedAt,
    error: errorText(run.value === 'backoff' || run.value === 'queued' ? ctx.error ?? lastFailure(ctx, attempts) : ctx.error),
    environment: ctx.environment,
  };
}
