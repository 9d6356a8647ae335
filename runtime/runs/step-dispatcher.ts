// Performs the effect of one claimed step and turns its outcome into the run event that reports it.
// Webhook steps call out (signed, keyed); custom actions go to the hook-runner (custom-action-step.ts).

import type { JsonValue } from '../../actors/json.ts';
import type { PersistedRun } from '../../actors/run-transition.ts';
import type { RunEvent } from '../../actors/run-types.ts';
import type { Work } from '../../actors/run-work.ts';
import type { EventRecord } from '../events/event-codec.ts';
import { RawJson, stringifyWithRaw } from '../validation/raw-json.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';
import type { ActionInvoker } from '../hook-runner/client.ts';
import type { ProjectionWrite } from '../actions/output-contract.ts';
import { pinnedActionVersion, runCustomAction, type ActionEffects, type ActionResolver } from './custom-action-step.ts';
import type { OutboundConnections } from './outbound-connections.ts';
import type { HoldStepInput } from './step-input.ts';
import { sendWebhook } from './webhook-step.ts';

type DispatchWork = Extract<Work, { kind: 'dispatch_step' }>;
/** A run event without its time: the engine stamps `at` when it applies the event. */
export type StepReport = Extract<RunEvent, { type: 'step.succeeded' | 'step.failed' | 'step.skipped' }> extends infer E
  ? E extends RunEvent
    ? Omit<E, 'at'>
    : never
  : never;

/** A step's report plus the writes that must commit in the same transaction as its completion. */
export interface StepOutcome {
  readonly report: StepReport;
  readonly effects?: ActionEffects;
}

export interface StepContext {
  readonly run: PersistedRun;
  readonly work: DispatchWork;
  readonly version: WorkflowVersion | undefined;
  /** The run's event with its payload as the JSON text stored: a step hands the payload on as that text and never parses it. */
  readonly event: EventRecord | undefined;
  /** The workflow's signing secrets as they are when asked (webhook-step.ts reads them as a request leaves). */
  readonly signingSecrets: () => readonly string[];
  readonly selfPort: number;
  readonly connections: OutboundConnections;
  readonly nowMs: number;
  readonly actions: ActionResolver | undefined;
  readonly runner: ActionInvoker | undefined;
  /** Takes a place in the derived-event budget of the run's root event (derived-budget.ts); false when it is used up. */
  readonly takeDerived: () => boolean;
  /** The org's projection row cap when the row a custom action's output writes would pass it, else undefined. */
  readonly rowLimitReached?: (projection: ProjectionWrite) => number | undefined;
  /** Whether the run still waits for this attempt (running, under its fence): asked before a webhook leaves or a guest runs. */
  readonly stillWanted: () => boolean;
  /** Aborted once the run no longer waits for this attempt: a custom action's call still queued in the hook-runner is dropped unrun (attempts-out.ts). */
  readonly withdrawn?: () => AbortSignal;
  /** Asked just before the step's effect goes out (a webhook's request written, a custom action's call made); false: it must not (AttemptOut.goingOut). */
  readonly goingOut?: () => boolean;
  /** Keeps the step input's bytes taken past the step's end, while a webhook body is still being sent (step-input.ts). */
  readonly holdInput?: HoldStepInput;
  /**
   * A webhook step's prior step results as JSON text (priorResultsText), counted with its input;
   * undefined for other steps. Taken from the snapshot beforehand: `run` comes without its results
   * (withoutResults in held-results.ts), so that nothing holds them while the step is out.
   */
  readonly priorResults: string | undefined;
}

/**
 * The JSON text of the results of the steps before `work`'s, when its step is a webhook step (its
 * body carries them: up to 49 custom action outputs of 256 KiB each); undefined for other steps.
 * Worked out before the step takes its input bytes, so that the budget counts them too.
 */
export function priorResultsText(run: PersistedRun, work: DispatchWork, version: WorkflowVersion | undefined): string | undefined {
  const step = version?.definition.steps.find((s) => s.id === work.stepId);
  if (step?.type !== 'webhook') return undefined;
  const results: Record<string, JsonValue> = {};
  for (const prior of run.context.steps.slice(0, work.stepIndex)) results[prior.id] = prior.result;
  return JSON.stringify(results);
}

/**
 * The JSON body a webhook step receives: the triggering event (its payload as received: serialize
 * with stringifyWithRaw), the run, and every prior step result.
 */
export function stepInput(ctx: StepContext): unknown {
  const { run, work, event } = ctx;
  return {
    event:
      event === undefined
        ? null
        : {
            id: event.id,
            type: event.type,
            payload: new RawJson(event.payload_json),
            environment: event.environment,
            source: event.source,
            received_at: event.received_at,
            correlation_id: event.correlation_id,
            causation_id: event.causation_id,
            depth: event.depth,
          },
    // No attempt number (it is in `sluice-attempt`): every attempt sends the same bytes under its
    // one Idempotency-Key, which receivers that keep a key's first request require.
    run: { id: run.context.runId, workflow_id: run.context.workflowId, workflow_version: run.context.workflowVersion },
    step: { id: work.stepId, index: work.stepIndex },
    results: new RawJson(ctx.priorResults ?? '{}'),
  };
}

/** Never throws: an unexpected failure becomes a retryable `step.failed`. */
export async function performStep(ctx: StepContext): Promise<StepOutcome> {
  try {
    return await perform(ctx);
  } catch (error) {
    const fenced = { stepId: ctx.work.stepId, fence: ctx.work.fence };
    return { report: { type: 'step.failed', ...fenced, error: { code: 'dispatch_error', message: error instanceof Error ? error.message : String(error), retryable: true } } };
  }
}

async function perform(ctx: StepContext): Promise<StepOutcome> {
  const { work } = ctx;
  const fenced = { stepId: work.stepId, fence: work.fence };
  const step = ctx.version?.definition.steps.find((s) => s.id === work.stepId);
  if (step === undefined) {
    return { report: { type: 'step.failed', ...fenced, error: { code: 'workflow_version_missing', message: 'The pinned workflow version or its step no longer exists.', retryable: false } } };
  }
  if (step.type === 'custom_action') {
    // Counted as out from here: what the call goes through before the hook-runner is not told apart.
    if (ctx.goingOut?.() === false) {
      return { report: { type: 'step.failed', ...fenced, error: { code: 'custom_action_withdrawn', message: 'Not run: the runtime was stopping, and had recorded the step as not run.', retryable: false } } };
    }
    const outcome = await runCustomAction(
      {
        orgId: ctx.run.context.orgId,
        actionId: step.action_id,
        pinnedVersion: pinnedActionVersion(ctx.run.context, step.action_id),
        payloadJson: ctx.event === undefined ? 'null' : ctx.event.payload_json,
        eventDepth: ctx.event?.depth ?? 0,
        takeDerived: ctx.takeDerived,
        ...(ctx.rowLimitReached === undefined ? {} : { rowLimitReached: ctx.rowLimitReached }),
        idempotencyKey: work.idempotencyKey,
        fence: work.fence,
        stillWanted: ctx.stillWanted,
        ...(ctx.withdrawn === undefined ? {} : { withdrawn: ctx.withdrawn() }),
      },
      ctx.actions,
      ctx.runner,
    );
    // The attempt started when the call went to the hook-runner (its started_at); a refusal before that never started.
    const started = outcome.invoked ? { ...fenced, startedAt: ctx.nowMs } : fenced;
    return outcome.ok
      ? { report: { type: 'step.succeeded', ...started, result: outcome.result, evidence: outcome.evidence }, effects: outcome.effects }
      : { report: { type: 'step.failed', ...started, error: outcome.error, ...(outcome.evidence === null ? {} : { evidence: outcome.evidence }) } };
  }
  if (step.type !== 'webhook') {
    return { report: { type: 'step.failed', ...fenced, error: { code: 'unsupported_step_type', message: `A ${step.type} step cannot be dispatched.`, retryable: false } } };
  }
  {
    const outcome = await sendWebhook(
      {
        orgId: ctx.run.context.orgId,
        url: step.url,
        headers: step.headers,
        timeoutMs: step.timeout_ms,
        body: stringifyWithRaw(stepInput(ctx)),
        idempotencyKey: work.idempotencyKey,
        fence: work.fence,
        attempt: work.attempt,
        signingSecrets: ctx.signingSecrets,
        nowMs: ctx.nowMs,
        stillWanted: ctx.stillWanted,
        ...(ctx.withdrawn === undefined ? {} : { withdrawn: ctx.withdrawn }),
        ...(ctx.holdInput === undefined ? {} : { stillSending: ctx.holdInput }),
        ...(ctx.goingOut === undefined ? {} : { goingOut: ctx.goingOut }),
      },
      { selfPort: ctx.selfPort, connections: ctx.connections },
    );
    // The attempt started when the request got its connection; a refused one never started.
    const started = outcome.sentAt === undefined ? fenced : { ...fenced, startedAt: outcome.sentAt };
    return {
      report: outcome.ok
        ? { type: 'step.succeeded', ...started, result: outcome.result, evidence: outcome.evidence }
        : { type: 'step.failed', ...started, error: outcome.error, evidence: outcome.evidence },
    };
  }
}
