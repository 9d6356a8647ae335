// The XState v5 machine of one run of a pinned workflow version: admission, step claims under
// fences, retries with durable backoff, durable delays, cancel and resume. No I/O, no clock.
//
// | state     | meaning                                              | slot | pendingWork      | leaves on                                    |
// |-----------|------------------------------------------------------|------|------------------|----------------------------------------------|
// | queued    | waits for its tenant supervisor (new, or after a     | no   | await_admission  | run.admitted -> running / delaying /         |
// |           | timer, a resume or a restart)                        |      |                  |   completed; run.cancel -> cancelled         |
// | running   | current step claimed under `fence`; effect in flight | yes  | dispatch_step    | step.succeeded, step.skipped -> running      |
// |           | (attempt `pending`; `startedAt` set by step.started) |      |                  |   (next step) / delaying / completed;        |
// |           |                                                      |      |                  |   step.failed -> backoff / failed;           |
// |           |                                                      |      |                  |   run.recovered -> queued; run.cancel        |
// | backoff   | durable retry timer, `retryAt` absolute ms           | no   | arm_timer retry  | timer.fired (at >= retryAt) -> queued        |
// | delaying  | durable delay step, `wakeAt` absolute ms             | no   | arm_timer delay  | timer.fired (at >= wakeAt) -> queued /       |
// |           |                                                      |      |                  |   completed (if it was the last step)        |
// | failed    | a step failed for good; `error` says why             | no   | none             | run.resume -> queued; run.cancel             |
// | completed | every step succeeded or was skipped (final)          | no   | done             | -                                            |
// | cancelled | stopped on request (final)                           | no   | done             | -                                            |
//
// A run holds a tenant slot exactly while it is `running`: between consecutive steps it keeps
// it, a timer wait gives it back, and the wake-up re-enters `queued` (supervisor's resume lane).
// `advancing` is a transient routing state (eventless transitions): no snapshot ever rests there.
// Step reports whose step id or fence do not match the open attempt are ignored (no transition),
// as is any event a state does not list. `snapshot.can(event)` tells the shell beforehand.
// Every claim of a step increments `context.fence`, so fences strictly increase within a run.

import { and, assign, setup } from 'xstate';
import {
  abandonPending,
  allStepsDone,
  cancelRun,
  claimCurrent,
  currentStep,
  decideFailure,
  finishCurrent,
  initialContext,
  isCurrentReport,
  markStarted,
  prepareResume,
  recordFailure,
  skipReplayed,
  timerDue,
} from './run-progress.ts';
import type { RunContext, RunEvent, RunInput } from './run-types.ts';

type EventOf<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

/** The context of the input-less actor XState builds inside its pure `transition()`; never persisted. */
const UNUSED_CONTEXT: RunContext = Object.freeze(
  initialContext({ orgId: '', runId: '', eventId: '', workflowId: '', workflowVersion: 0, environment: 'production', skipSideEffects: false, steps: [], createdAt: 0 } as unknown as RunInput),
);

/** The open attempt's start, from the outcome that reports it, unless a `step.started` already set it. */
const startedBy = (context: RunContext, startedAt: number | undefined): RunContext => (startedAt === undefined ? context : markStarted(context, startedAt));

export const runMachine = setup({
  types: {
    context: {} as RunContext,
    events: {} as RunEvent,
    input: {} as RunInput,
  },
  guards: {
    isCurrentReport: ({ context, event }) =>
      'fence' in event && isCurrentReport(context, event.stepId, event.fence),
    shouldRetry: ({ context, event }) =>
      event.type === 'step.failed' && decideFailure(context, event.error).kind === 'retry',
    retryDue: ({ context, event }) => timerDue(context.retryAt, event.at),
    wakeDue: ({ context, event }) => timerDue(context.wakeAt, event.at),
    allDone: ({ context }) => allStepsDone(context),
    delayIsLastStep: ({ context }) => context.currentIndex >= context.steps.length - 1,
    currentIsDelay: ({ context }) => currentStep(context)?.type === 'delay',
  },
  actions: {
    // Every accepted event carries the shell's `at`; routing actions read it back from context.
    touch: assign(({ event }) => ({ updatedAt: event.at })),
    claim: assign(({ context }) => claimCurrent(context, context.updatedAt)),
    skipReplayed: assign(({ context }) => skipReplayed(context, context.updatedAt)),
    markStarted: assign(({ context, event }) => markStarted(context, event.at)),
    recordSuccess: assign(({ context, event }) => {
      const e = event as EventOf<'step.succeeded'>;
      return finishCurrent(startedBy(context, e.startedAt), 'succeeded', e.at, e.result, e.evidence ?? null);
    }),
    recordSkip: assign(({ context, event }) => {
      const e = event as EventOf<'step.skipped'>;
      return finishCurrent(startedBy(context, e.startedAt), 'skipped', e.at, null, e.evidence ?? { reason: e.reason });
    }),
    recordFailure: assign(({ context, event }) => {
      const e = event as EventOf<'step.failed'>;
      return recordFailure(startedBy(context, e.startedAt), e.error, e.evidence ?? null, e.at);
    }),
    completeDelay: assign(({ context, event }) => finishCurrent(context, 'succeeded', event.at, null, { woke_at: event.at })),
    clearRetry: assign(({ event }) => ({ retryAt: null, updatedAt: event.at })),
    abandon: assign(({ context, event }) => abandonPending(context, event.at)),
    cancel: assign(({ context, event }) => {
      const e = event as EventOf<'run.cancel'>;
      return cancelRun(context, e.at, e.reason ?? 'cancelled');
    }),
    prepareResume: assign(({ context, event }) => prepareResume(context, event.at)),
  },
}).createMachine({
  id: 'run',
  // XState's pure `transition()` (applyRunEvent) builds a throwaway actor without input and
  // evaluates this; without the guard `initialContext` throws there, and the error (with its stack)
  // cost ~40 % of every pure transition. That actor's context is never used. Real runs always
  // start with input (startRunActor) or from a snapshot (restoreRunActor).
  context: ({ input }) => (input === undefined ? UNUSED_CONTEXT : initialContext(input)),
  initial: 'queued',
  on: {
    'run.cancel': { target: '.cancelled', actions: 'cancel' },
  },
  states: {
    queued: {
      on: { 'run.admitted': { target: 'advancing', actions: 'touch' } },
    },
    advancing: {
      // Entry runs before the eventless transitions are chosen, so they see the cursor after skips.
      entry: 'skipReplayed',
      always: [
        { guard: 'allDone', target: 'completed' },
        { guard: 'currentIsDelay', target: 'delaying', actions: 'claim' },
        { target: 'running', actions: 'claim' },
      ],
    },
    running: {
      on: {
        'step.started': { guard: 'isCurrentReport', actions: 'markStarted' },
        'step.succeeded': { guard: 'isCurrentReport', target: 'advancing', actions: 'recordSuccess' },
        'step.skipped': { guard: 'isCurrentReport', target: 'advancing', actions: 'recordSkip' },
        'step.failed': [
          { guard: and(['isCurrentReport', 'shouldRetry']), target: 'backoff', actions: 'recordFailure' },
          { guard: 'isCurrentReport', target: 'failed', actions: 'recordFailure' },
        ],
        'run.recovered': { target: 'queued', actions: 'abandon' },
      },
    },
    backoff: {
      on: { 'timer.fired': { guard: 'retryDue', target: 'queued', actions: 'clearRetry' } },
    },
    delaying: {
      on: {
        'timer.fired': [
          { guard: and(['wakeDue', 'delayIsLastStep']), target: 'completed', actions: 'completeDelay' },
          { guard: 'wakeDue', target: 'queued', actions: 'completeDelay' },
        ],
      },
    },
    failed: {
      on: { 'run.resume': { target: 'queued', actions: 'prepareResume' } },
    },
    completed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

export type RunMachine = typeof runMachine;
