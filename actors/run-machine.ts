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
// |           |                                                      |      |                  |   run.recovered -> queued (failed at the     |
// |           |                                                      |      |                  |   5th abandoned attempt in a row); run.cancel|
// | backoff   | durable retry timer, `retryAt` absolute ms           | no   | arm_timer retry  | timer.fired (at >= retryAt) -> queued        |
// | delaying  | durable delay step, `wakeAt` absolute ms             | no   | arm_timer delay  | timer.fired (at >= wakeAt) -> queued /       |
// |           |                                                      |      |                  |   completed (if it was the last step)        |
// | failed    | a step failed for good; `error` says why             | no   | none             | run.resume -> queued; run.cancel             |
// | completed | every step succeeded or was skipped (final)          | no   | done             | -                                            |
// | cancelled | stopped on request (final)                           | no   | done             | -                                            |
//
// A run holds a tenant slot exactly while it is `running`: between consecutive steps it keeps
// it, a timer wait gives it back, and the wake-up re-enters `queued` (supervisor's resume lane).
// Moving on to the next step (replay skips, then the claim) is part of the transition that
// causes it, `advance`, and guards pick its target beforehand (`advanceStop`): each event is one
// microstep with one `assign`. An earlier version routed through a transient `advancing` state;
// no snapshot ever rested there, so none is stored (and readPersistedRun rejects one).
// Step reports whose step id or fence do not match the open attempt are ignored (no transition),
// as is any event a state does not list. `snapshot.can(event)` tells the shell beforehand.
// Every claim of a step increments `context.fence`, so fences strictly increase within a run.

import { and, assign, setup } from 'xstate';
import {
  abandonForGood,
  abandonPending,
  abandonsTooOften,
  advance,
  advanceStop,
  cancelRun,
  decideFailure,
  finishCurrent,
  initialContext,
  isCurrentReport,
  markStarted,
  prepareResume,
  recordFailure,
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
    abandonsTooOften: ({ context, event }) => abandonsTooOften(context, event.type === 'run.recovered' ? event.cause : undefined),
    isCurrentReport: ({ context, event }) =>
      'fence' in event && isCurrentReport(context, event.stepId, event.fence),
    shouldRetry: ({ context, event }) =>
      event.type === 'step.failed' && decideFailure(context, event.error).kind === 'retry',
    retryDue: ({ context, event }) => timerDue(context.retryAt, event.at),
    wakeDue: ({ context, event }) => timerDue(context.wakeAt, event.at),
    delayIsLastStep: ({ context }) => context.currentIndex >= context.steps.length - 1,
    // Where the transition's `advance` will leave the run: from the cursor on admission, from the
    // step after the current one when that one finishes (guards run before the `assign`).
    admissionCompletes: ({ context }) => advanceStop(context, context.currentIndex) === 'completed',
    admissionDelays: ({ context }) => advanceStop(context, context.currentIndex) === 'delaying',
    finishCompletes: ({ context }) => advanceStop(context, context.currentIndex + 1) === 'completed',
    finishDelays: ({ context }) => advanceStop(context, context.currentIndex + 1) === 'delaying',
  },
  actions: {
    // One `assign` per transition: XState clones the snapshot once per `assign`.
    admitAndAdvance: assign(({ context, event }) => advance({ ...context, updatedAt: event.at }, event.at)),
    markStarted: assign(({ context, event }) => markStarted(context, event.at)),
    succeedAndAdvance: assign(({ context, event }) => {
      const e = event as EventOf<'step.succeeded'>;
      return advance(finishCurrent(startedBy(context, e.startedAt), 'succeeded', e.at, e.result, e.evidence ?? null), e.at);
    }),
    skipAndAdvance: assign(({ context, event }) => {
      const e = event as EventOf<'step.skipped'>;
      return advance(finishCurrent(startedBy(context, e.startedAt), 'skipped', e.at, null, e.evidence ?? { reason: e.reason }), e.at);
    }),
    recordFailure: assign(({ context, event }) => {
      const e = event as EventOf<'step.failed'>;
      return recordFailure(startedBy(context, e.startedAt), e.error, e.evidence ?? null, e.at);
    }),
    completeDelay: assign(({ context, event }) => finishCurrent(context, 'succeeded', event.at, null, { woke_at: event.at })),
    clearRetry: assign(({ event }) => ({ retryAt: null, updatedAt: event.at })),
    abandon: assign(({ context, event }) => abandonPending(context, event.at, event.type === 'run.recovered' ? event.cause : undefined)),
    abandonForGood: assign(({ context, event }) => abandonForGood(context, event.at)),
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
      on: {
        'run.admitted': [
          { guard: 'admissionCompletes', target: 'completed', actions: 'admitAndAdvance' },
          { guard: 'admissionDelays', target: 'delaying', actions: 'admitAndAdvance' },
          { target: 'running', actions: 'admitAndAdvance' },
        ],
      },
    },
    running: {
      // A finished step whose successor is dispatched stays `running` (no target): the claim of
      // the next step is the new open attempt. `running` has no entry or exit actions to re-run.
      on: {
        'step.started': { guard: 'isCurrentReport', actions: 'markStarted' },
        'step.succeeded': [
          { guard: and(['isCurrentReport', 'finishCompletes']), target: 'completed', actions: 'succeedAndAdvance' },
          { guard: and(['isCurrentReport', 'finishDelays']), target: 'delaying', actions: 'succeedAndAdvance' },
          { guard: 'isCurrentReport', actions: 'succeedAndAdvance' },
        ],
        'step.skipped': [
          { guard: and(['isCurrentReport', 'finishCompletes']), target: 'completed', actions: 'skipAndAdvance' },
          { guard: and(['isCurrentReport', 'finishDelays']), target: 'delaying', actions: 'skipAndAdvance' },
          { guard: 'isCurrentReport', actions: 'skipAndAdvance' },
        ],
        'step.failed': [
          { guard: and(['isCurrentReport', 'shouldRetry']), target: 'backoff', actions: 'recordFailure' },
          { guard: 'isCurrentReport', target: 'failed', actions: 'recordFailure' },
        ],
        'run.recovered': [
          { guard: 'abandonsTooOften', target: 'failed', actions: 'abandonForGood' },
          { target: 'queued', actions: 'abandon' },
        ],
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
