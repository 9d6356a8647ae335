// Data of one durable run: its input, its context (persisted as JSON after every transition)
// and the events that move it. Everything here must survive a JSON round trip unchanged.

import type { EventId, OrgId, RunId, StepId, WorkflowId } from './ids.ts';
import type { JsonValue } from './json.ts';
import type { RetryPolicy } from './retry-policy.ts';

export type Environment = 'production' | 'sandbox';
export type StepType = 'webhook' | 'custom_action' | 'delay';

/** What the run needs to know about one step of its pinned workflow version. */
export interface RunStepPlan {
  readonly id: StepId;
  readonly type: StepType;
  /** Resolved retry policy; `null` for `delay` steps, which cannot fail. */
  readonly retry: RetryPolicy | null;
  /** Length of a `delay` step; `null` for the others. */
  readonly delayMs: number | null;
}

/** Input of `runMachine` (and `startRun`). Times are epoch milliseconds. */
export interface RunInput {
  readonly orgId: OrgId;
  readonly runId: RunId;
  readonly eventId: EventId;
  readonly workflowId: WorkflowId;
  readonly workflowVersion: number;
  readonly environment: Environment;
  /** `replay_skip_side_effects` of the triggering event: webhook steps are recorded as skipped. */
  readonly skipSideEffects: boolean;
  readonly steps: readonly RunStepPlan[];
  readonly createdAt: number;
}

/** A step failure as reported by the shell (HTTP status, network error, hook-runner error...). */
export interface StepFailure {
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
}

/** A step failure as stored: optional fields become `null` so JSON round trips are exact. */
export interface StepError {
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly retryAfterMs: number | null;
}

/** `pending`: claimed with a fence, effect not yet reported. `abandoned`: lost to a restart. */
export type AttemptOutcome = 'pending' | 'succeeded' | 'failed' | 'skipped' | 'abandoned' | 'cancelled';

export interface StepAttempt {
  /** 1-based, counts every claim of the step, including abandoned ones. */
  readonly attempt: number;
  /** The run fence issued for this claim; strictly greater than every earlier fence of the run. */
  readonly fence: number;
  readonly claimedAt: number;
  /** When the shell reported the effect as started (`step.started`, or `startedAt` on its outcome), or the claim time for delays. */
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  readonly outcome: AttemptOutcome;
  readonly error: StepError | null;
  readonly evidence: JsonValue | null;
  /**
   * What the effect of an attempt closed as `cancelled` reported afterwards (it was already out when
   * the run was cancelled): the run stays cancelled, but support can see that it was delivered.
   */
  readonly afterCancel?: LateOutcome;
}

export interface LateOutcome {
  readonly outcome: 'succeeded' | 'failed' | 'skipped';
  readonly at: number;
  readonly startedAt: number | null;
  readonly error: StepError | null;
  readonly evidence: JsonValue | null;
}

/** `cancelled`: the run was cancelled while this step was under way (claimed, out, or waiting to retry). */
export type StepStatus = 'pending' | 'active' | 'retrying' | 'succeeded' | 'skipped' | 'failed' | 'cancelled';

export interface StepRecord extends RunStepPlan {
  readonly status: StepStatus;
  readonly result: JsonValue | null;
  /** Failed attempts since the run was created or last resumed: the retry budget used. */
  readonly failures: number;
  /** The latest attempts: a resume keeps ATTEMPTS_KEPT_AT_RESUME of them (numbers go on from the last). */
  readonly attempts: readonly StepAttempt[];
  /** Earlier attempts a resume let go of (absent: none). */
  readonly attemptsDropped?: number;
}

export type RunFailureReason = 'non_retryable' | 'retries_exhausted';

/** A person resumed the run at `at`; it had failed with `error`. */
export interface Resume {
  readonly at: number;
  readonly error: RunError | null;
}

export interface RunError {
  readonly code: string;
  readonly message: string;
  readonly stepId: StepId;
  readonly reason: RunFailureReason;
}

/** The run's input (same identity fields, same meaning) plus its progress. */
export interface RunContext extends Omit<RunInput, 'steps'> {
  readonly steps: readonly StepRecord[];
  /** Index of the first step that is not finished; equals `steps.length` when all are. */
  readonly currentIndex: number;
  /** Highest fence issued so far (0 before the first claim). */
  readonly fence: number;
  /** Absolute epoch ms at which the backoff timer is due; set only in `backoff`. */
  readonly retryAt: number | null;
  /** Absolute epoch ms at which the delay step is due; set only in `delaying`. */
  readonly wakeAt: number | null;
  readonly error: RunError | null;
  readonly cancelReason: string | null;
  /** When a person last resumed the run (absent: never); attempts before it do not pin action versions. */
  readonly resumedAt?: number;
  /**
   * The run's fence when a person last resumed it: attempts under higher fences were claimed since
   * (their times can be earlier than resumedAt, should the clock have been set back meanwhile).
   * Absent in runs resumed by an earlier release, which compare times (claimedSinceResume).
   */
  readonly resumedAtFence?: number;
  /** Each resume (the latest RESUMES_KEPT), with the error the run had failed with: resuming clears `error`. Absent: never resumed. */
  readonly resumes?: readonly Resume[];
  /** `at` of the last accepted event: the run's only notion of "now". */
  readonly updatedAt: number;
}

interface Timed {
  /** Epoch ms, from the shell's clock. The core never reads a clock. */
  readonly at: number;
}

interface Fenced extends Timed {
  readonly stepId: StepId;
  readonly fence: number;
}

/** An effect's outcome: `startedAt` is when the shell handed the effect out (unset: never started). */
interface Reported extends Fenced {
  readonly startedAt?: number;
}

export type RunEvent =
  | ({ readonly type: 'run.admitted' } & Timed)
  | ({ readonly type: 'step.started' } & Fenced)
  | ({ readonly type: 'step.succeeded'; readonly result: JsonValue; readonly evidence?: JsonValue } & Reported)
  | ({ readonly type: 'step.failed'; readonly error: StepFailure; readonly evidence?: JsonValue } & Reported)
  | ({ readonly type: 'step.skipped'; readonly reason: string; readonly evidence?: JsonValue } & Reported)
  | ({ readonly type: 'timer.fired' } & Timed)
  | ({ readonly type: 'run.cancel'; readonly reason?: string } & Timed)
  | ({ readonly type: 'run.resume' } & Timed)
  | ({ readonly type: 'run.recovered'; readonly cause?: RestartCause } & Timed);

/**
 * How the process that left a run's attempt open ended, as boot recovery tells it (boot-record.ts):
 * `crashed` (the default: it died while it could have been sending it, which is what a step that
 * brings the process down looks like), `stopped` (a clean stop), `stopped_unsent` (a clean stop that
 * recorded the attempt as not yet sent: it still waited for a connection, say), or `start_cut_off`
 * (it died while it started, after its recovery claimed the attempt and before anything was sent).
 */
export type RestartCause = 'crashed' | 'stopped' | 'stopped_unsent' | 'start_cut_off';

export type RunEventType = RunEvent['type'];

export const RUN_STATES = ['queued', 'running', 'backoff', 'delaying', 'failed', 'completed', 'cancelled'] as const;
export type RunStateName = (typeof RUN_STATES)[number];
