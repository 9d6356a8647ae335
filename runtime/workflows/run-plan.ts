// Bridges a pinned workflow version to the input of a new run: the ordered step plan with
// retry policies resolved and delays in milliseconds, so the run core never reads documents.

import type { EventId, RunId } from '../../actors/ids.ts';
import { DEFAULT_RETRY_POLICY, type RetryPolicy } from '../../actors/retry-policy.ts';
import type { RunInput, RunStepPlan } from '../../actors/run-types.ts';
import type { StepRetry, WorkflowStep, WorkflowVersion } from './workflow-types.ts';

const toPolicy = (retry: StepRetry | undefined): RetryPolicy =>
  retry === undefined ? DEFAULT_RETRY_POLICY : { maxRetries: retry.max_retries, initialMs: retry.initial_ms, maxMs: retry.max_ms };

export function planRunSteps(steps: readonly WorkflowStep[]): RunStepPlan[] {
  return steps.map((step): RunStepPlan => {
    switch (step.type) {
      case 'webhook':
      case 'custom_action':
        return { id: step.id, type: step.type, retry: toPolicy(step.retry), delayMs: null };
      case 'delay':
        return { id: step.id, type: 'delay', retry: null, delayMs: step.duration_ms };
    }
  });
}

export interface RunTrigger {
  readonly runId: RunId;
  readonly eventId: EventId;
  /** The event's `replay_skip_side_effects`. */
  readonly skipSideEffects: boolean;
  /** Epoch ms the run is created (the ingest transaction's time). */
  readonly at: number;
}

/** The `RunInput` for `startRun` / `runMachine` of one event against one pinned version. */
export function runInputFor(version: WorkflowVersion, trigger: RunTrigger): RunInput {
  return {
    orgId: version.org_id,
    runId: trigger.runId,
    eventId: trigger.eventId,
    workflowId: version.workflow_id,
    workflowVersion: version.version,
    environment: version.definition.environment,
    skipSideEffects: trigger.skipSideEffects,
    steps: planRunSteps(version.definition.steps),
    createdAt: trigger.at,
  };
}
