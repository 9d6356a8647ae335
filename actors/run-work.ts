// What the shell must do next for a run, derived from its persisted snapshot alone.
// XState does not replay actions on restore, so this — never an entry action — drives effects.

import type { RunId, StepId } from './ids.ts';
import { currentStep, pendingAttempt } from './run-progress.ts';
import { RUN_STATES, type Environment, type RunContext, type RunStateName } from './run-types.ts';

/** The persisted shape `pendingWork` reads: a live snapshot and its JSON round trip both fit. */
export interface RunSnapshotView {
  readonly value: RunStateName | (string & {});
  readonly context: RunContext;
}

export type AdmissionLane = 'new' | 'resume';

export type Work =
  /** `failed`: waits for a person to resume or cancel it. */
  | { readonly kind: 'none' }
  /** Enqueue with the tenant supervisor (of the run's environment); on admission send `run.admitted`. */
  | { readonly kind: 'await_admission'; readonly lane: AdmissionLane; readonly environment: Environment }
  /**
   * Perform the step's effect with exactly this fence and idempotency key, then report
   * `step.succeeded | step.failed | step.skipped` carrying `stepId` and `fence`.
   */
  | {
      readonly kind: 'dispatch_step';
      readonly stepId: StepId;
      readonly stepIndex: number;
      readonly stepType: 'webhook' | 'custom_action';
      readonly attempt: number;
      readonly fence: number;
      readonly idempotencyKey: string;
      readonly skipSideEffects: boolean;
    }
  /** Arm a durable timer; when the clock reaches `at`, send `timer.fired` with the current time. */
  | { readonly kind: 'arm_timer'; readonly at: number; readonly reason: 'retry' | 'delay' }
  /** `completed` or `cancelled`: nothing will ever happen again. */
  | { readonly kind: 'done' };

/** DESIGN §4: the effect key of a step is the same on every attempt of that run. */
export const stepIdempotencyKey = (runId: RunId, stepId: StepId): string => `${runId}:${stepId}`;

export function isRunStateName(value: unknown): value is RunStateName {
  return typeof value === 'string' && (RUN_STATES as readonly string[]).includes(value);
}

/**
 * Derives the next effect from `value` and `context` only. Identical for a live snapshot, its
 * `getPersistedSnapshot()` and that JSON's round trip; write it next to the snapshot (outbox).
 * A `dispatch_step` read after a restart must not be executed as is: send `run.recovered`
 * first, which abandons the attempt so that admission claims it again under a higher fence.
 */
export function pendingWork(snapshot: RunSnapshotView): Work {
  const ctx = snapshot.context;
  switch (snapshot.value) {
    case 'queued':
      return { kind: 'await_admission', lane: admissionLane(ctx), environment: ctx.environment };
    case 'running': {
      const step = currentStep(ctx);
      const attempt = pendingAttempt(ctx);
      if (step === undefined || attempt === undefined || step.type === 'delay') {
        throw new Error(`run ${ctx.runId}: running without an open step attempt`);
      }
      return {
        kind: 'dispatch_step',
        stepId: step.id,
        stepIndex: ctx.currentIndex,
        stepType: step.type,
        attempt: attempt.attempt,
        fence: attempt.fence,
        idempotencyKey: stepIdempotencyKey(ctx.runId, step.id),
        skipSideEffects: ctx.skipSideEffects,
      };
    }
    case 'backoff':
      return { kind: 'arm_timer', at: requireTime(ctx.retryAt, ctx, 'retryAt'), reason: 'retry' };
    case 'delaying':
      return { kind: 'arm_timer', at: requireTime(ctx.wakeAt, ctx, 'wakeAt'), reason: 'delay' };
    case 'failed':
      return { kind: 'none' };
    case 'completed':
    case 'cancelled':
      return { kind: 'done' };
    default:
      throw new Error(`run ${ctx.runId}: unknown state ${JSON.stringify(snapshot.value)}`);
  }
}

/** A run that has already claimed a step re-enters at the front of its tenant (resume lane). */
export function admissionLane(ctx: RunContext): AdmissionLane {
  return ctx.fence > 0 ? 'resume' : 'new';
}

/** `completed` or `cancelled`: final states, where `pendingWork` is `done`. */
export const isFinished = (snapshot: Pick<RunSnapshotView, 'value'>): boolean => snapshot.value === 'completed' || snapshot.value === 'cancelled';

/** True exactly while the run occupies one of its tenant's concurrency slots. */
export const holdsSlot = (snapshot: RunSnapshotView): boolean => snapshot.value === 'running';

function requireTime(value: number | null, ctx: RunContext, name: string): number {
  if (value === null) throw new Error(`run ${ctx.runId}: ${name} missing in a timer state`);
  return value;
}
