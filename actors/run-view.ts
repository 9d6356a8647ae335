// The API view of a run: a plain snake_case JSON object built from its snapshot, with every
// attempt of every step (times as ISO-8601 strings, or null when they have not happened).

import type { JsonValue } from './json.ts';
import type { AttemptOutcome, LateOutcome, RunError, RunFailureReason, StepError, StepStatus, StepType } from './run-types.ts';
import type { RunSnapshotView } from './run-work.ts';

export interface AttemptView {
  readonly attempt: number;
  readonly fence: number;
  readonly claimed_at: string;
  readonly started_at: string | null;
  readonly ended_at: string | null;
  readonly outcome: AttemptOutcome;
  readonly error: ErrorView | null;
  readonly evidence: JsonValue | null;
  /** A `cancelled` attempt's effect, as it reported after the cancel (it was already out); else null. */
  readonly after_cancel: {
    readonly outcome: LateOutcome['outcome'];
    readonly at: string;
    readonly started_at: string | null;
    readonly error: ErrorView | null;
    readonly evidence: JsonValue | null;
  } | null;
}

type ErrorView = { readonly code: string; readonly message: string; readonly retryable: boolean; readonly retry_after_ms: number | null };

export interface StepView {
  readonly id: string;
  readonly index: number;
  readonly type: StepType;
  readonly status: StepStatus;
  readonly result: JsonValue | null;
  readonly attempts: readonly AttemptView[];
  /** Earlier attempts no longer kept (a resume keeps a step's latest 25). */
  readonly earlier_attempts_dropped: number;
}

export interface RunView {
  readonly run_id: string;
  readonly org_id: string;
  readonly event_id: string;
  readonly workflow_id: string;
  readonly workflow_version: number;
  readonly environment: string;
  readonly state: string;
  readonly skip_side_effects: boolean;
  readonly current_step: { readonly id: string; readonly index: number; readonly type: StepType } | null;
  readonly fence: number;
  readonly retry_at: string | null;
  readonly wake_at: string | null;
  readonly error: RunErrorView | null;
  readonly cancel_reason: string | null;
  /** Each time a person resumed the run (the latest 20), with the error it had failed with. */
  readonly resumes: ReadonlyArray<{ readonly at: string; readonly error: RunErrorView | null }>;
  readonly created_at: string;
  readonly updated_at: string;
  readonly steps: readonly StepView[];
}

type RunErrorView = { readonly code: string; readonly message: string; readonly step_id: string; readonly reason: RunFailureReason };

const iso = (ms: number): string => new Date(ms).toISOString();
const runErrorView = (error: RunError | null): RunErrorView | null =>
  error === null ? null : { code: error.code, message: error.message, step_id: error.stepId, reason: error.reason };
const isoOrNull = (ms: number | null): string | null => (ms === null ? null : iso(ms));
const errorView = (error: StepError | null): ErrorView | null =>
  error === null ? null : { code: error.code, message: error.message, retryable: error.retryable, retry_after_ms: error.retryAfterMs };

/** Pure; safe on a live snapshot, a persisted one, or its JSON round trip. */
export function describeRun(snapshot: RunSnapshotView): RunView {
  const ctx = snapshot.context;
  const current = ctx.steps[ctx.currentIndex];
  return {
    run_id: ctx.runId,
    org_id: ctx.orgId,
    event_id: ctx.eventId,
    workflow_id: ctx.workflowId,
    workflow_version: ctx.workflowVersion,
    environment: ctx.environment,
    state: snapshot.value,
    skip_side_effects: ctx.skipSideEffects,
    current_step: current === undefined ? null : { id: current.id, index: ctx.currentIndex, type: current.type },
    fence: ctx.fence,
    retry_at: isoOrNull(ctx.retryAt),
    wake_at: isoOrNull(ctx.wakeAt),
    error: runErrorView(ctx.error),
    cancel_reason: ctx.cancelReason,
    resumes: (ctx.resumes ?? []).map((resume) => ({ at: iso(resume.at), error: runErrorView(resume.error) })),
    created_at: iso(ctx.createdAt),
    updated_at: iso(ctx.updatedAt),
    steps: ctx.steps.map((step, index) => ({
      id: step.id,
      index,
      type: step.type,
      status: step.status,
      result: step.result,
      attempts: step.attempts.map((a) => ({
        attempt: a.attempt,
        fence: a.fence,
        claimed_at: iso(a.claimedAt),
        started_at: isoOrNull(a.startedAt),
        ended_at: isoOrNull(a.endedAt),
        outcome: a.outcome,
        error: errorView(a.error),
        evidence: a.evidence,
        after_cancel: a.afterCancel === undefined ? null : {
          outcome: a.afterCancel.outcome,
          at: iso(a.afterCancel.at),
          started_at: isoOrNull(a.afterCancel.startedAt),
          error: errorView(a.afterCancel.error),
          evidence: a.afterCancel.evidence,
        },
      })),
      earlier_attempts_dropped: step.attemptsDropped ?? 0,
    })),
  };
}
