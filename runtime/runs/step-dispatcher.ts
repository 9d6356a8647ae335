// Performs the effect of one claimed step and turns its outcome into the run event that reports it.
// Webhook steps call out (signed, keyed); custom actions go to the hook-runner (a later slice).

import type { JsonValue } from '../../actors/json.ts';
import type { PersistedRun } from '../../actors/run-transition.ts';
import type { RunEvent } from '../../actors/run-types.ts';
import type { Work } from '../../actors/run-work.ts';
import type { StoredEvent } from '../events/event-record.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';
import { sendWebhook } from './webhook-step.ts';

type DispatchWork = Extract<Work, { kind: 'dispatch_step' }>;
/** A run event without its time: the engine stamps `at` when it applies the event. */
export type StepReport = Extract<RunEvent, { type: 'step.succeeded' | 'step.failed' | 'step.skipped' }> extends infer E
  ? E extends RunEvent
    ? Omit<E, 'at'>
    : never
  : never;

export interface StepContext {
  readonly run: PersistedRun;
  readonly work: DispatchWork;
  readonly version: WorkflowVersion | undefined;
  readonly event: StoredEvent | undefined;
  readonly signingSecrets: readonly string[];
  readonly selfPort: number;
  readonly nowMs: number;
}

/** The JSON body a webhook step receives: the triggering event, the run, and every prior step result. */
export function stepInput(ctx: StepContext): JsonValue {
  const { run, work, event } = ctx;
  const results: Record<string, JsonValue> = {};
  for (const step of run.context.steps.slice(0, work.stepIndex)) results[step.id] = step.result;
  return {
    event:
      event === undefined
        ? null
        : {
            id: event.id,
            type: event.type,
            payload: event.payload as JsonValue,
            environment: event.environment,
            source: event.source,
            received_at: event.received_at,
            correlation_id: event.correlation_id,
            causation_id: event.causation_id,
            depth: event.depth,
          },
    run: { id: run.context.runId, workflow_id: run.context.workflowId, workflow_version: run.context.workflowVersion, attempt: work.attempt },
    step: { id: work.stepId, index: work.stepIndex },
    results,
  };
}

/** Never throws: an unexpected failure becomes a retryable `step.failed`. */
export async function performStep(ctx: StepContext): Promise<StepReport> {
  const { work } = ctx;
  const fenced = { stepId: work.stepId, fence: work.fence };
  const step = ctx.version?.definition.steps.find((s) => s.id === work.stepId);
  if (step === undefined) {
    return { type: 'step.failed', ...fenced, error: { code: 'workflow_version_missing', message: 'The pinned workflow version or its step no longer exists.', retryable: false } };
  }
  if (step.type === 'custom_action') {
    return {
      type: 'step.failed',
      ...fenced,
      error: { code: 'custom_action_unavailable', message: `Custom action "${step.action_id}" cannot run: custom actions are not enabled in this build.`, retryable: false },
    };
  }
  if (step.type !== 'webhook') {
    return { type: 'step.failed', ...fenced, error: { code: 'unsupported_step_type', message: `A ${step.type} step cannot be dispatched.`, retryable: false } };
  }
  try {
    const outcome = await sendWebhook(
      {
        url: step.url,
        headers: step.headers,
        timeoutMs: step.timeout_ms,
        body: JSON.stringify(stepInput(ctx)),
        idempotencyKey: work.idempotencyKey,
        fence: work.fence,
        attempt: work.attempt,
        signingSecrets: ctx.signingSecrets,
        nowMs: ctx.nowMs,
      },
      { selfPort: ctx.selfPort },
    );
    return outcome.ok
      ? { type: 'step.succeeded', ...fenced, result: outcome.result, evidence: outcome.evidence }
      : { type: 'step.failed', ...fenced, error: outcome.error, evidence: outcome.evidence };
  } catch (error) {
    return { type: 'step.failed', ...fenced, error: { code: 'dispatch_error', message: error instanceof Error ? error.message : String(error), retryable: true } };
  }
}
