// Test fixtures for the run machine: run inputs, a driver over a real XState actor, and the
// persist -> JSON -> restore round trip that a crash and reboot amount to.

import assert from 'node:assert/strict';
import { createActor, type Actor } from 'xstate';
import { asEventId, asOrgId, asRunId, asStepId, asWorkflowId, type StepId } from '../../actors/ids.ts';
import type { JsonValue } from '../../actors/json.ts';
import type { RetryPolicy } from '../../actors/retry-policy.ts';
import { runMachine } from '../../actors/run-machine.ts';
import { restoreRunActor, type PersistedRun } from '../../actors/run-transition.ts';
import type { RunInput, RunStepPlan, StepAttempt } from '../../actors/run-types.ts';
import { pendingWork, type Work } from '../../actors/run-work.ts';
import { assertRetryDue } from '../helpers/retry-due.ts';

export const T0 = Date.UTC(2025, 0, 1);
export const FAST_RETRY: RetryPolicy = { maxRetries: 2, initialMs: 1000, maxMs: 4000 };

export const webhookStep = (id: string, retry: RetryPolicy = FAST_RETRY): RunStepPlan => ({ id: asStepId(id), type: 'webhook', retry, delayMs: null });
export const actionStep = (id: string, retry: RetryPolicy = FAST_RETRY): RunStepPlan => ({ id: asStepId(id), type: 'custom_action', retry, delayMs: null });
export const delayStep = (id: string, delayMs: number): RunStepPlan => ({ id: asStepId(id), type: 'delay', retry: null, delayMs });

export function runInput(steps: RunStepPlan[], overrides: Partial<RunInput> = {}): RunInput {
  return {
    orgId: asOrgId('org_a'),
    runId: asRunId('run_1'),
    eventId: asEventId('evt_1'),
    workflowId: asWorkflowId('wf_1'),
    workflowVersion: 3,
    environment: 'production',
    skipSideEffects: false,
    steps,
    createdAt: T0,
    ...overrides,
  };
}

export type RunActor = Actor<typeof runMachine>;

export function startActor(input: RunInput): RunActor {
  return createActor(runMachine, { input }).start();
}

/** What a reboot sees: the persisted snapshot after a JSON round trip, in a fresh actor. */
export function restart(actor: RunActor): RunActor {
  const stored = JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as PersistedRun;
  actor.stop();
  return restoreRunActor(stored).start();
}

export const work = (actor: RunActor): Work => pendingWork(actor.getSnapshot());

/** The open step's dispatch work; fails the test if the run is not dispatching. */
export function dispatch(actor: RunActor): Extract<Work, { kind: 'dispatch_step' }> {
  const w = work(actor);
  assert.equal(w.kind, 'dispatch_step', `expected dispatch_step, got ${JSON.stringify(w)}`);
  return w as Extract<Work, { kind: 'dispatch_step' }>;
}

export const succeed = (actor: RunActor, at: number, result: JsonValue = { ok: true }): void => {
  const d = dispatch(actor);
  actor.send({ type: 'step.succeeded', stepId: d.stepId, fence: d.fence, result, evidence: { status: 200 }, at });
};

export const failStep = (actor: RunActor, at: number, retryable: boolean, retryAfterMs?: number): void => {
  const d = dispatch(actor);
  const error = { code: retryable ? 'http_503' : 'http_400', message: retryable ? 'Service Unavailable' : 'Bad Request', retryable };
  actor.send({ type: 'step.failed', stepId: d.stepId, fence: d.fence, error: retryAfterMs === undefined ? error : { ...error, retryAfterMs }, at });
};

export const stateOf = (actor: RunActor): string => String(actor.getSnapshot().value);

/** The actor's armed retry timer, checked with assertRetryDue. */
export function retryDue(actor: RunActor, from: number, scheduledMs: number): number {
  const w = work(actor);
  assert.equal(w.kind === 'arm_timer' && w.reason, 'retry', `expected a retry timer, got ${JSON.stringify(w)}`);
  return assertRetryDue((w as Extract<Work, { kind: 'arm_timer' }>).at, from, scheduledMs);
}

export function attemptsOf(actor: RunActor, stepId: string): readonly StepAttempt[] {
  const step = actor.getSnapshot().context.steps.find((s) => s.id === (stepId as StepId));
  assert.ok(step, `no step ${stepId}`);
  return step.attempts;
}

/** Every fence ever issued in the run, in claim order; must be 1, 2, 3, ... */
export function allFences(actor: RunActor): number[] {
  return actor
    .getSnapshot()
    .context.steps.flatMap((s) => s.attempts.map((a) => a.fence))
    .sort((x, y) => x - y);
}
