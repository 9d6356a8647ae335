// Pure context updates of a run: claiming a step under a new fence, recording outcomes,
// deciding retry versus failure. The run machine only chooses which of these to apply.

import type { StepId } from './ids.ts';
import type { JsonValue } from './json.ts';
import { jitterOf, nextRetryDelay } from './retry-policy.ts';
import type { LateOutcome, RestartCause, RunContext, RunError, RunInput, StepAttempt, StepError, StepFailure, StepRecord } from './run-types.ts';

export function initialContext(input: RunInput): RunContext {
  return {
    orgId: input.orgId,
    runId: input.runId,
    eventId: input.eventId,
    workflowId: input.workflowId,
    workflowVersion: input.workflowVersion,
    environment: input.environment,
    skipSideEffects: input.skipSideEffects,
    steps: input.steps.map((plan) => ({ ...plan, status: 'pending', result: null, failures: 0, attempts: [] })),
    currentIndex: 0,
    fence: 0,
    retryAt: null,
    wakeAt: null,
    error: null,
    cancelReason: null,
    createdAt: input.createdAt,
    updatedAt: input.createdAt,
  };
}

export const currentStep = (ctx: RunContext): StepRecord | undefined => ctx.steps[ctx.currentIndex];

/** The open (pending) attempt of the current step, if any. */
export function pendingAttempt(ctx: RunContext): StepAttempt | undefined {
  const last = currentStep(ctx)?.attempts.at(-1);
  return last?.outcome === 'pending' ? last : undefined;
}

/** A step report is current only if it names the current step and its open attempt's fence. */
export function isCurrentReport(ctx: RunContext, stepId: StepId, fence: number): boolean {
  const step = currentStep(ctx);
  const attempt = pendingAttempt(ctx);
  return step !== undefined && attempt !== undefined && step.id === stepId && attempt.fence === fence;
}

export const allStepsDone = (ctx: RunContext): boolean => ctx.currentIndex >= ctx.steps.length;

function withCurrent(ctx: RunContext, update: (step: StepRecord) => StepRecord): RunContext {
  const step = currentStep(ctx);
  if (step === undefined) return ctx;
  const steps = ctx.steps.slice();
  steps[ctx.currentIndex] = update(step);
  return { ...ctx, steps };
}

/** Patches the open attempt; a closed attempt is history and never changes. */
function patchOpenAttempt(step: StepRecord, patch: Partial<StepAttempt>): StepRecord {
  const attempts = step.attempts.slice();
  const last = attempts.at(-1);
  if (last === undefined || last.outcome !== 'pending') return step;
  attempts[attempts.length - 1] = { ...last, ...patch };
  return { ...step, attempts };
}

/** The evidence reason of an attempt a replay with `skipSideEffects` closed as skipped (skipReplayed). */
export const REPLAY_SKIP_REASON = 'replay_skip_side_effects';

/** A step a replay with `skipSideEffects` closes as skipped instead of running it: a webhook. */
const isReplaySkipped = (ctx: RunContext, step: StepRecord | undefined): step is StepRecord => ctx.skipSideEffects && step?.type === 'webhook';

/**
 * Replays with `skipSideEffects` never send webhooks: each such step at the cursor is claimed
 * under its own fence and closed as `skipped` at once. Stops at the first step that must run.
 */
export function skipReplayed(ctx: RunContext, at: number): RunContext {
  let next = ctx;
  for (let step = currentStep(next); isReplaySkipped(next, step); step = currentStep(next)) {
    const fence = next.fence + 1;
    const attempt: StepAttempt = {
      attempt: nextAttemptNumber(step),
      fence,
      claimedAt: at,
      startedAt: null,
      endedAt: at,
      outcome: 'skipped',
      error: null,
      evidence: { reason: REPLAY_SKIP_REASON },
    };
    next = withCurrent({ ...next, fence, updatedAt: at }, (s) => ({ ...s, status: 'skipped', attempts: [...s.attempts, attempt] }));
    next = { ...next, currentIndex: next.currentIndex + 1 };
  }
  return next;
}

/** Claims the current step under the next run fence. A `delay` step starts at once and sets `wakeAt`. */
export function claimCurrent(ctx: RunContext, at: number): RunContext {
  const step = currentStep(ctx);
  if (step === undefined) return ctx;
  const fence = ctx.fence + 1;
  const attempt: StepAttempt = {
    attempt: nextAttemptNumber(step),
    fence,
    claimedAt: at,
    startedAt: step.type === 'delay' ? at : null,
    endedAt: null,
    outcome: 'pending',
    error: null,
    evidence: null,
  };
  const claimed = withCurrent({ ...ctx, fence, updatedAt: at, retryAt: null, wakeAt: null }, (s) => ({
    ...s,
    status: 'active',
    attempts: [...s.attempts, attempt],
  }));
  return step.type === 'delay' ? { ...claimed, wakeAt: at + (step.delayMs ?? 0) } : claimed;
}

/** The state a run rests in after `advance`: finished, waiting on a delay, or dispatching a step. */
export type AdvanceStop = 'completed' | 'delaying' | 'running';

/**
 * Where `advance` will leave a run whose cursor moves to step `from`: past the steps a replay
 * skips, at the end, at a delay, or at a step to dispatch. It builds nothing, so the machine's
 * guards ask it before the transition's `assign` runs (guards see the context before it).
 */
export function advanceStop(ctx: RunContext, from: number): AdvanceStop {
  let index = from;
  while (isReplaySkipped(ctx, ctx.steps[index])) index += 1;
  const step = ctx.steps[index];
  if (step === undefined) return 'completed';
  return step.type === 'delay' ? 'delaying' : 'running';
}

/**
 * Brings the cursor (at the step to run next) to rest: closes the steps a replay skips, then claims
 * the step it reaches, if any. `advanceStop(ctx, ctx.currentIndex)` says where it rests.
 */
export function advance(ctx: RunContext, at: number): RunContext {
  const next = skipReplayed(ctx, at);
  return allStepsDone(next) ? next : claimCurrent(next, at);
}

export function markStarted(ctx: RunContext, at: number): RunContext {
  const attempt = pendingAttempt(ctx);
  if (attempt === undefined || attempt.startedAt !== null) return { ...ctx, updatedAt: at };
  return withCurrent({ ...ctx, updatedAt: at }, (s) => patchOpenAttempt(s, { startedAt: at }));
}

/** Closes the open attempt as succeeded or skipped, stores the result and moves to the next step. */
export function finishCurrent(ctx: RunContext, outcome: 'succeeded' | 'skipped', at: number, result: JsonValue, evidence: JsonValue | null): RunContext {
  const updated = withCurrent({ ...ctx, updatedAt: at, wakeAt: null }, (s) => ({
    ...patchOpenAttempt(s, { outcome, endedAt: at, evidence }),
    status: outcome,
    result,
  }));
  return { ...updated, currentIndex: updated.currentIndex + 1 };
}

export type FailureDecision = { readonly kind: 'retry'; readonly delayMs: number } | { readonly kind: 'fail'; readonly error: RunError };

/** Retry or fail, given the current step's policy and the failures it has already used. */
export function decideFailure(ctx: RunContext, failure: StepFailure): FailureDecision {
  const step = currentStep(ctx);
  if (step === undefined) throw new Error('decideFailure: no current step');
  const base = { code: failure.code, stepId: step.id };
  if (!failure.retryable || step.retry === null) {
    return { kind: 'fail', error: { ...base, reason: 'non_retryable', message: failure.message } };
  }
  const failed = step.failures + 1;
  const delay = nextRetryDelay(step.retry, failed, failure.retryAfterMs, jitterOf(`${ctx.runId}:${step.id}:${failed}`));
  if (delay !== 'exhausted') return { kind: 'retry', delayMs: delay };
  return {
    kind: 'fail',
    error: { ...base, reason: 'retries_exhausted', message: `Step "${step.id}" failed ${failed === 1 ? 'once' : `${failed} times`}; last error: ${failure.message}` },
  };
}

/** A reported failure as an attempt stores it. */
export const stepErrorOf = (failure: StepFailure): StepError => ({ code: failure.code, message: failure.message, retryable: failure.retryable, retryAfterMs: failure.retryAfterMs ?? null });

/** Closes the open attempt as failed and applies the decision (arm `retryAt`, or set the run error). */
export function recordFailure(ctx: RunContext, failure: StepFailure, evidence: JsonValue | null, at: number): RunContext {
  const decision = decideFailure(ctx, failure);
  const error = stepErrorOf(failure);
  const updated = withCurrent({ ...ctx, updatedAt: at }, (s) => ({
    ...patchOpenAttempt(s, { outcome: 'failed', endedAt: at, error, evidence }),
    status: decision.kind === 'retry' ? 'retrying' : 'failed',
    failures: s.failures + 1,
  }));
  return decision.kind === 'retry' ? { ...updated, retryAt: at + decision.delayMs } : { ...updated, error: decision.error };
}

/** Evidence of an attempt a restart found open: whether its effect went out is not recorded. */
export const ABANDONED_AT_RESTART = { reason: 'runtime_restarted', effect_sent: 'unknown' } as const;

/** Evidence of an attempt open at each kind of restart (RestartCause): only `crashed` counts toward MAX_ABANDONED_IN_A_ROW. */
const ABANDONED_BY_CAUSE = {
  crashed: ABANDONED_AT_RESTART,
  stopped: { reason: 'runtime_stopped', effect_sent: 'unknown' },
  stopped_unsent: { reason: 'runtime_stopped', effect_sent: 'no' },
  start_cut_off: { reason: 'runtime_start_interrupted', effect_sent: 'no' },
} as const satisfies Record<RestartCause, { readonly reason: string; readonly effect_sent: string }>;

/**
 * After a restart the open attempt's effect is lost track of: close it (at `at`, the restart; its
 * evidence says how the process ended); the next claim gets a new fence and sends the effect with the same key.
 */
export function abandonPending(ctx: RunContext, at: number, cause: RestartCause = 'crashed'): RunContext {
  return withCurrent({ ...ctx, updatedAt: at }, (s) => ({
    ...patchOpenAttempt(s, { outcome: 'abandoned', endedAt: at, evidence: ABANDONED_BY_CAUSE[cause] }),
    status: 'pending',
  }));
}

/** Whether an abandoned attempt was cut off by a process that died while it could have been out (evidence of RestartCause `crashed`, as every release before the causes wrote). */
function abandonedByCrash(attempt: StepAttempt): boolean {
  const reason = (attempt.evidence as { readonly reason?: unknown } | null)?.reason;
  return reason === undefined || reason === ABANDONED_AT_RESTART.reason;
}

/**
 * Attempts of one step in a row a crash may find open before the step fails. Abandoned attempts
 * use none of the step's retries (a deploy is not the step's fault), so a step that brings the
 * process down every time (out of memory on its body, a receiver that kills its caller) would be
 * sent again at every restart, forever. Attempts a clean stop left open, or that a start cut off
 * before it sent anything, neither count nor break the row.
 */
export const MAX_ABANDONED_IN_A_ROW = 5;

/** Whether `attempt` was claimed after the run's last resume (any attempt, for a run never resumed); told by fence, not by time. */
export function claimedSinceResume(ctx: RunContext, attempt: StepAttempt): boolean {
  if (ctx.resumedAtFence !== undefined) return attempt.fence > ctx.resumedAtFence;
  return attempt.claimedAt >= (ctx.resumedAt ?? Number.NEGATIVE_INFINITY);
}

/**
 * Whether abandoning the open attempt (after a restart of `cause`) makes MAX_ABANDONED_IN_A_ROW of
 * the current step's cut off by a crash in a row (since the run's last resume).
 */
export function abandonsTooOften(ctx: RunContext, cause: RestartCause = 'crashed'): boolean {
  const attempts = currentStep(ctx)?.attempts ?? [];
  if (cause !== 'crashed' || attempts.at(-1)?.outcome !== 'pending') return false;
  let inARow = 1;
  for (let i = attempts.length - 2; i >= 0; i -= 1) {
    const attempt = attempts[i] as StepAttempt;
    if (attempt.outcome !== 'abandoned' || !claimedSinceResume(ctx, attempt)) break;
    if (abandonedByCrash(attempt)) inARow += 1;
  }
  return inARow >= MAX_ABANDONED_IN_A_ROW;
}

/** Abandons the open attempt and fails the run: its step was cut off by a restart too often in a row (abandonsTooOften). */
export function abandonForGood(ctx: RunContext, at: number): RunContext {
  const abandoned = abandonPending(ctx, at, 'crashed');
  const step = currentStep(abandoned) as StepRecord;
  const message =
    `The runtime went down (not a clean stop) during ${MAX_ABANDONED_IN_A_ROW} attempts of step "${step.id}" in a row (each abandoned at the next start, its effect unknown); ` +
    'it is not sent again on its own, in case the step is what brings the process down. Resume the run once the cause is known.';
  return { ...withCurrent(abandoned, (s) => ({ ...s, status: 'failed' })), error: { code: 'step_interrupted_repeatedly', stepId: step.id, reason: 'retries_exhausted', message } };
}

/**
 * Evidence of an attempt cancelled while it was out: its request (or guest) may have gone out or be
 * on its way. Its `afterCancel` says what happened once the answer comes; a stop or crash before that
 * leaves this as the whole record, so it must not read as "never sent".
 */
export const CANCELLED_WHILE_OUT = { reason: 'cancelled_while_out', effect_sent: 'unknown' } as const;

/**
 * The step under way (claimed at least once, not finished or failed) ends `cancelled` with its open
 * attempt; a delay sends nothing, so only a webhook or custom action attempt says it may have.
 */
export function cancelRun(ctx: RunContext, at: number, reason: string): RunContext {
  const updated = withCurrent(ctx, (s) =>
    s.attempts.length === 0 || s.status === 'failed'
      ? s
      : { ...patchOpenAttempt(s, { outcome: 'cancelled', endedAt: at, evidence: s.attempts.at(-1)?.evidence ?? (s.type === 'delay' ? null : CANCELLED_WHILE_OUT) }), status: 'cancelled' },
  );
  return { ...updated, updatedAt: at, retryAt: null, wakeAt: null, cancelReason: reason };
}

/**
 * A cancelled run's record of what the attempt it cancelled reported afterwards, once; any other
 * report (another fence, a second one) leaves the context as it is.
 */
export function recordAfterCancel(ctx: RunContext, stepId: StepId, fence: number, late: LateOutcome): RunContext {
  const step = currentStep(ctx);
  const last = step?.attempts.at(-1);
  if (step?.id !== stepId || last === undefined || last.fence !== fence || last.outcome !== 'cancelled' || last.afterCancel !== undefined) return ctx;
  const attempts = step.attempts.slice();
  attempts[attempts.length - 1] = { ...last, afterCancel: late };
  // The run changed (its record does), though its state did not: a reader syncing by updated_at sees it.
  return withCurrent({ ...ctx, updatedAt: Math.max(ctx.updatedAt, late.at) }, (s) => ({ ...s, attempts }));
}

/** Resumes a run keeps in its context, newest last (a run can be resumed without end). */
export const RESUMES_KEPT = 20;
/**
 * Attempts of a step a resume keeps, the latest (a full pass of the largest retry budget, 21, and
 * a few): every transition writes the whole run, and a run resumed without end grew by its
 * attempts' evidence each time (47 MB after 100 resumes, each write stalling every tenant).
 */
export const ATTEMPTS_KEPT_AT_RESUME = 25;

/** Number of a step's next attempt: one past its last, dropped ones counted. */
const nextAttemptNumber = (step: StepRecord): number => (step.attempts.at(-1)?.attempt ?? 0) + 1;

/** `step` with at most ATTEMPTS_KEPT_AT_RESUME attempts, the latest, and how many it let go of. */
function keepLatestAttempts(step: StepRecord): StepRecord {
  const extra = step.attempts.length - ATTEMPTS_KEPT_AT_RESUME;
  if (extra <= 0) return step;
  return { ...step, attempts: step.attempts.slice(extra), attemptsDropped: (step.attemptsDropped ?? 0) + extra };
}

/**
 * From `failed`: clear the error and give the failed step a fresh retry budget; finished steps stay
 * finished. The error goes into `resumes`, so the run still tells why a person had to step in.
 */
export function prepareResume(ctx: RunContext, at: number): RunContext {
  const trimmed = { ...ctx, steps: ctx.steps.map(keepLatestAttempts) };
  const updated = withCurrent(trimmed, (s) => ({ ...s, status: 'pending', failures: 0 }));
  const resumes = [...(ctx.resumes ?? []), { at, error: ctx.error }].slice(-RESUMES_KEPT);
  return { ...updated, error: null, updatedAt: at, resumedAt: at, resumedAtFence: ctx.fence, resumes };
}

export const timerDue = (due: number | null, at: number): boolean => due !== null && at >= due;
