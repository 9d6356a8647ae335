// The run machine driven through a real XState actor with injected times: happy path, retries,
// failures, cancel, resume, stale fences, delays, replays that skip side effects, and advancing.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createActor } from 'xstate';
import { asRunId, asStepId } from '../../actors/ids.ts';
import { runMachine } from '../../actors/run-machine.ts';
import { ATTEMPTS_KEPT_AT_RESUME, RESUMES_KEPT } from '../../actors/run-progress.ts';
import { describeRun } from '../../actors/run-view.ts';
import { applyReportAfterCancel, persistSnapshot } from '../../actors/run-transition.ts';
import type { RunStepPlan } from '../../actors/run-types.ts';
import {
  actionStep,
  allFences,
  attemptsOf,
  delayStep,
  dispatch,
  failStep,
  restart,
  retryDue,
  runInput,
  startActor,
  type RunActor,
  stateOf,
  succeed,
  T0,
  webhookStep,
  work,
} from './run-fixtures.ts';

describe('run machine: happy path', () => {
  it('runs queued -> running per step -> completed, with one fence per claim and stable keys', () => {
    const actor = startActor(runInput([webhookStep('a'), actionStep('b')]));
    assert.equal(stateOf(actor), 'queued');
    assert.deepEqual(work(actor), { kind: 'await_admission', lane: 'new', environment: 'production' });

    actor.send({ type: 'run.admitted', at: T0 + 10 });
    assert.deepEqual(work(actor), {
      kind: 'dispatch_step', stepId: 'a', stepIndex: 0, stepType: 'webhook', attempt: 1, fence: 1, idempotencyKey: 'run_1:a', skipSideEffects: false,
    });
    actor.send({ type: 'step.started', stepId: asStepId('a'), fence: 1, at: T0 + 11 });
    succeed(actor, T0 + 20, { delivered: true });

    const second = dispatch(actor);
    assert.equal(second.stepId, 'b');
    assert.equal(second.fence, 2);
    assert.equal(second.idempotencyKey, 'run_1:b');
    succeed(actor, T0 + 30);

    assert.equal(stateOf(actor), 'completed');
    assert.equal(actor.getSnapshot().status, 'done');
    assert.deepEqual(work(actor), { kind: 'done' });
    const [a] = attemptsOf(actor, 'a');
    assert.deepEqual(a, { attempt: 1, fence: 1, claimedAt: T0 + 10, startedAt: T0 + 11, endedAt: T0 + 20, outcome: 'succeeded', error: null, evidence: { status: 200 } });
    assert.deepEqual(actor.getSnapshot().context.steps[0]?.result, { delivered: true });
  });
});

describe('run machine: when an effect started', () => {
  it('takes startedAt from the outcome that reports it, unless step.started already set it', () => {
    const actor = startActor(runInput([webhookStep('a'), webhookStep('b')]));
    actor.send({ type: 'run.admitted', at: T0 });
    actor.send({ type: 'step.succeeded', stepId: asStepId('a'), fence: 1, result: null, startedAt: T0 + 5, at: T0 + 20 });
    actor.send({ type: 'step.started', stepId: asStepId('b'), fence: 2, at: T0 + 21 });
    actor.send({ type: 'step.failed', stepId: asStepId('b'), fence: 2, error: { code: 'x', message: 'no', retryable: false }, startedAt: T0 + 25, at: T0 + 30 });
    const [a] = attemptsOf(actor, 'a');
    const [b] = attemptsOf(actor, 'b');
    assert.deepEqual([a?.startedAt, a?.endedAt], [T0 + 5, T0 + 20]);
    assert.deepEqual([b?.startedAt, b?.endedAt], [T0 + 21, T0 + 30], 'the earlier report wins');
    assert.equal(actor.getSnapshot().context.updatedAt, T0 + 30);
  });
});

describe('run machine: retries', () => {
  it('parks a retryable failure in backoff, ignores an early timer, and retries under a higher fence', () => {
    const actor = startActor(runInput([webhookStep('a')]));
    actor.send({ type: 'run.admitted', at: T0 });
    failStep(actor, T0 + 100, true);
    assert.equal(stateOf(actor), 'backoff');
    const due = retryDue(actor, T0 + 100, 1000);

    const before = actor.getSnapshot();
    actor.send({ type: 'timer.fired', at: due - 1 });
    assert.equal(actor.getSnapshot(), before, 'an early timer changes nothing');

    actor.send({ type: 'timer.fired', at: due });
    assert.deepEqual(work(actor), { kind: 'await_admission', lane: 'resume', environment: 'production' });
    actor.send({ type: 'run.admitted', at: T0 + 1200 });
    const retry = dispatch(actor);
    assert.equal(retry.attempt, 2);
    assert.equal(retry.fence, 2);
    assert.equal(retry.idempotencyKey, 'run_1:a');
    succeed(actor, T0 + 1300);
    assert.equal(stateOf(actor), 'completed');
    assert.deepEqual(attemptsOf(actor, 'a').map((a) => a.outcome), ['failed', 'succeeded']);
  });

  it('spreads the retries of runs that failed together, the same way every time for one run', () => {
    const dues = Array.from({ length: 200 }, (_, i) => {
      const actor = startActor(runInput([webhookStep('a')], { runId: asRunId(`run_${i}`) }));
      actor.send({ type: 'run.admitted', at: T0 });
      failStep(actor, T0, true);
      return retryDue(actor, T0, 1000);
    });
    assert.ok(new Set(dues).size > 100, `200 runs share ${new Set(dues).size} retry times`);
    assert.ok(Math.min(...dues) < T0 + 850 && Math.max(...dues) > T0 + 950, 'the spread covers the jitter window');
    const again = startActor(runInput([webhookStep('a')], { runId: asRunId('run_7') }));
    again.send({ type: 'run.admitted', at: T0 });
    failStep(again, T0, true);
    assert.equal(work(again).kind === 'arm_timer' && (work(again) as { at: number }).at, dues[7], 'a run decides its jitter the same way on every replay');
  });

  it('uses retryAfterMs from the failure instead of the backoff', () => {
    const actor = startActor(runInput([webhookStep('a')]));
    actor.send({ type: 'run.admitted', at: T0 });
    failStep(actor, T0 + 100, true, 2500);
    assert.deepEqual(work(actor), { kind: 'arm_timer', at: T0 + 2600, reason: 'retry' });
    assert.equal(attemptsOf(actor, 'a')[0]?.error?.retryAfterMs, 2500);
  });

  it('fails at once on a non-retryable error, with the reason', () => {
    const actor = startActor(runInput([webhookStep('a'), webhookStep('b')]));
    actor.send({ type: 'run.admitted', at: T0 });
    failStep(actor, T0 + 5, false);
    assert.equal(stateOf(actor), 'failed');
    assert.deepEqual(work(actor), { kind: 'none' });
    assert.deepEqual(actor.getSnapshot().context.error, { code: 'http_400', message: 'Bad Request', stepId: 'a', reason: 'non_retryable' });
    assert.equal(attemptsOf(actor, 'b').length, 0, 'later steps never start');
  });

  it('fails with retries_exhausted after max_retries retries (FAST_RETRY: 2 retries, 3 attempts)', () => {
    const actor = startActor(runInput([webhookStep('a')]));
    let now = T0;
    actor.send({ type: 'run.admitted', at: now });
    for (const expectedDelay of [1000, 2000]) {
      failStep(actor, (now += 10), true);
      actor.send({ type: 'timer.fired', at: (now = retryDue(actor, now, expectedDelay)) });
      actor.send({ type: 'run.admitted', at: (now += 1) });
    }
    failStep(actor, (now += 10), true);
    assert.equal(stateOf(actor), 'failed');
    const error = actor.getSnapshot().context.error;
    assert.equal(error?.reason, 'retries_exhausted');
    assert.equal(error?.code, 'http_503');
    assert.match(error?.message ?? '', /failed 3 times/);
    assert.deepEqual(attemptsOf(actor, 'a').map((a) => a.fence), [1, 2, 3]);
  });
});

describe('run machine: fences', () => {
  it('ignores reports with a stale fence or another step id', () => {
    const actor = startActor(runInput([webhookStep('a'), webhookStep('b')]));
    actor.send({ type: 'run.admitted', at: T0 });
    failStep(actor, T0 + 1, true);
    actor.send({ type: 'timer.fired', at: T0 + 2000 });
    actor.send({ type: 'run.admitted', at: T0 + 2001 });
    const current = dispatch(actor);
    assert.equal(current.fence, 2);

    const before = actor.getSnapshot();
    const stale = { type: 'step.succeeded', stepId: asStepId('a'), fence: 1, result: 'late', at: T0 + 2002 } as const;
    assert.equal(before.can(stale), false);
    actor.send(stale);
    actor.send({ type: 'step.failed', stepId: asStepId('a'), fence: 1, error: { code: 'x', message: 'x', retryable: false }, at: T0 + 2003 });
    actor.send({ type: 'step.succeeded', stepId: asStepId('b'), fence: 2, result: 'wrong step', at: T0 + 2004 });
    actor.send({ type: 'step.succeeded', stepId: asStepId('a'), fence: 3, result: 'future fence', at: T0 + 2005 });
    assert.equal(actor.getSnapshot(), before, 'no ignored report changed the snapshot');

    succeed(actor, T0 + 2010);
    const dup = { type: 'step.succeeded', stepId: asStepId('a'), fence: 2, result: 'duplicate', at: T0 + 2011 } as const;
    assert.equal(actor.getSnapshot().can(dup), false, 'a duplicate of an accepted report is stale too');
    assert.deepEqual(allFences(actor), [1, 2, 3]);
  });
});

describe('run machine: cancel and resume', () => {
  it('cancels from queued, running, backoff, delaying and failed; late reports are then ignored', () => {
    const cancelIn = (drive: (a: ReturnType<typeof startActor>) => void, expectOutcome?: string) => {
      const actor = startActor(runInput([webhookStep('a'), delayStep('d', 1000)]));
      drive(actor);
      actor.send({ type: 'run.cancel', at: T0 + 50_000, reason: 'user asked' });
      assert.equal(stateOf(actor), 'cancelled');
      assert.deepEqual(work(actor), { kind: 'done' });
      assert.equal(actor.getSnapshot().context.cancelReason, 'user asked');
      if (expectOutcome !== undefined) {
        const attempts = actor.getSnapshot().context.steps.flatMap((s) => s.attempts);
        assert.equal(attempts.at(-1)?.outcome, expectOutcome);
      }
      return actor;
    };
    cancelIn(() => {});
    const running = cancelIn((a) => a.send({ type: 'run.admitted', at: T0 }), 'cancelled');
    running.send({ type: 'step.succeeded', stepId: asStepId('a'), fence: 1, result: null, at: T0 + 60_000 });
    assert.equal(stateOf(running), 'cancelled');
    const backoff = cancelIn((a) => {
      a.send({ type: 'run.admitted', at: T0 });
      failStep(a, T0 + 1, true);
    }, 'failed');
    assert.equal(backoff.getSnapshot().context.steps[0]!.attempts[0]!.evidence, null, 'a closed attempt keeps its own evidence');
    const delaying = cancelIn((a) => {
      a.send({ type: 'run.admitted', at: T0 });
      succeed(a, T0 + 1);
    }, 'cancelled');
    assert.equal(delaying.getSnapshot().context.steps[1]!.attempts[0]!.evidence, null, 'a delay sent nothing: its cancelled attempt does not say it may have');
    cancelIn((a) => {
      a.send({ type: 'run.admitted', at: T0 });
      failStep(a, T0 + 1, false);
    }, 'failed');
  });

  it('marks the step under way cancelled; a report of the attempt it closed is kept once, beside it, and the run stays cancelled', () => {
    const actor = startActor(runInput([webhookStep('a'), webhookStep('b')]));
    actor.send({ type: 'run.admitted', at: T0 });
    actor.send({ type: 'run.cancel', at: T0 + 10 });
    const cancelled = persistSnapshot(actor.getPersistedSnapshot());
    assert.deepEqual(cancelled.context.steps.map((s) => s.status), ['cancelled', 'pending']);
    assert.deepEqual(cancelled.context.steps[0]!.attempts[0]!.evidence, { reason: 'cancelled_while_out', effect_sent: 'unknown' }, 'until a report says, nobody knows whether it went out (a crash may mean nobody ever will)');
    const report = (fence: number, at: number) => ({ type: 'step.succeeded' as const, stepId: asStepId('a'), fence, result: null, evidence: { status: 200 }, startedAt: T0 + 1, at });
    assert.equal(applyReportAfterCancel(cancelled, report(2, T0 + 20)).changed, false, 'another fence is not this attempt');
    const late = applyReportAfterCancel(cancelled, report(1, T0 + 20));
    assert.equal(late.changed, true);
    assert.equal(late.run.value, 'cancelled');
    assert.deepEqual(late.work, { kind: 'done' });
    const [attempt] = late.run.context.steps[0]!.attempts;
    assert.equal(attempt?.outcome, 'cancelled');
    assert.deepEqual(attempt?.afterCancel, { outcome: 'succeeded', at: T0 + 20, startedAt: T0 + 1, error: null, evidence: { status: 200 } });
    assert.deepEqual([cancelled.context.updatedAt, late.run.context.updatedAt], [T0 + 10, T0 + 20], 'the run changed when the report was kept (a reader syncing by updated_at missed it)');
    assert.equal(applyReportAfterCancel(late.run, report(1, T0 + 30)).changed, false, 'only the first report is kept');
    const completed = startActor(runInput([webhookStep('a')]));
    completed.send({ type: 'run.admitted', at: T0 });
    succeed(completed, T0 + 1);
    assert.equal(applyReportAfterCancel(persistSnapshot(completed.getPersistedSnapshot()), report(1, T0 + 2)).changed, false, 'only cancelled runs');
  });

  it('resumes a failed run from the failed step; completed steps are never dispatched again', () => {
    const actor = startActor(runInput([webhookStep('a'), webhookStep('b'), actionStep('c')]));
    actor.send({ type: 'run.admitted', at: T0 });
    succeed(actor, T0 + 1);
    failStep(actor, T0 + 2, false);
    assert.equal(stateOf(actor), 'failed');

    assert.equal(actor.getSnapshot().can({ type: 'run.resume', at: T0 + 3 }), true);
    actor.send({ type: 'run.resume', at: T0 + 100 });
    assert.equal(actor.getSnapshot().context.error, null);
    assert.deepEqual(work(actor), { kind: 'await_admission', lane: 'resume', environment: 'production' });
    actor.send({ type: 'run.admitted', at: T0 + 101 });
    const again = dispatch(actor);
    assert.equal(again.stepId, 'b');
    assert.equal(again.attempt, 2);
    assert.equal(again.fence, 3);
    succeed(actor, T0 + 102);
    assert.equal(dispatch(actor).stepId, 'c');
    succeed(actor, T0 + 103);
    assert.equal(stateOf(actor), 'completed');
    assert.equal(attemptsOf(actor, 'a').length, 1, 'step a ran once');
  });

  it('gives the resumed step a fresh retry budget', () => {
    const actor = startActor(runInput([webhookStep('a', { maxRetries: 0, initialMs: 1, maxMs: 1 })]));
    actor.send({ type: 'run.admitted', at: T0 });
    failStep(actor, T0 + 1, true);
    assert.equal(actor.getSnapshot().context.error?.reason, 'retries_exhausted');
    assert.match(actor.getSnapshot().context.error?.message ?? '', /^Step "a" failed once; last error/);
    actor.send({ type: 'run.resume', at: T0 + 2 });
    actor.send({ type: 'run.admitted', at: T0 + 3 });
    assert.equal(dispatch(actor).attempt, 2);
    assert.equal(actor.getSnapshot().context.steps[0]?.failures, 0);
  });

  it('keeps each resume with the error it cleared, the latest RESUMES_KEPT of them', () => {
    const actor = startActor(runInput([webhookStep('a', { maxRetries: 0, initialMs: 1, maxMs: 1 })]));
    actor.send({ type: 'run.admitted', at: T0 });
    for (let i = 0; i < RESUMES_KEPT + 5; i++) {
      failStep(actor, T0 + 10 * i + 1, true);
      actor.send({ type: 'run.resume', at: T0 + 10 * i + 2 });
      actor.send({ type: 'run.admitted', at: T0 + 10 * i + 3 });
    }
    const { resumes, error } = actor.getSnapshot().context;
    assert.equal(error, null);
    assert.equal(resumes?.length, RESUMES_KEPT);
    assert.equal(resumes?.at(-1)?.at, T0 + 10 * (RESUMES_KEPT + 4) + 2, 'the latest kept');
    assert.equal(resumes?.[0]?.at, T0 + 10 * 5 + 2, 'the oldest dropped');
    assert.equal(resumes?.[0]?.error?.reason, 'retries_exhausted');
  });

  it('a resume keeps each step\'s latest ATTEMPTS_KEPT_AT_RESUME attempts; numbers and fences go on, the view counts those let go', () => {
    const actor = startActor(runInput([webhookStep('a', { maxRetries: 0, initialMs: 1, maxMs: 1 })]));
    actor.send({ type: 'run.admitted', at: T0 });
    const passes = ATTEMPTS_KEPT_AT_RESUME + 10;
    for (let i = 0; i < passes; i++) {
      failStep(actor, T0 + 10 * i + 1, true);
      actor.send({ type: 'run.resume', at: T0 + 10 * i + 2 });
      actor.send({ type: 'run.admitted', at: T0 + 10 * i + 3 });
    }
    const next = dispatch(actor);
    assert.deepEqual([next.attempt, next.fence], [passes + 1, passes + 1], 'numbered from the last attempt, dropped ones counted');
    const attempts = attemptsOf(actor, 'a');
    assert.equal(attempts.length, ATTEMPTS_KEPT_AT_RESUME + 1, 'the kept ones and the one just claimed');
    assert.deepEqual(attempts.map((a) => a.attempt), Array.from({ length: ATTEMPTS_KEPT_AT_RESUME + 1 }, (_, i) => passes - ATTEMPTS_KEPT_AT_RESUME + 1 + i));
    const restored = restart(actor).getSnapshot();
    const step = describeRun({ value: String(restored.value), context: restored.context }).steps[0]!;
    assert.equal(step.earlier_attempts_dropped, passes - ATTEMPTS_KEPT_AT_RESUME);
    assert.equal(step.attempts.at(-1)?.attempt, passes + 1, 'kept across a restart');
  });

  it('does not resume a run that is not failed', () => {
    const actor = startActor(runInput([webhookStep('a')]));
    assert.equal(actor.getSnapshot().can({ type: 'run.resume', at: T0 }), false);
  });
});

describe('run machine: delays and skipped steps', () => {
  it('waits durably on a delay step without dispatching it, then gives the slot back', () => {
    const actor = startActor(runInput([delayStep('wait', 60_000), webhookStep('b')]));
    actor.send({ type: 'run.admitted', at: T0 });
    assert.equal(stateOf(actor), 'delaying');
    assert.deepEqual(work(actor), { kind: 'arm_timer', at: T0 + 60_000, reason: 'delay' });
    const before = actor.getSnapshot();
    actor.send({ type: 'timer.fired', at: T0 + 59_999 });
    assert.equal(actor.getSnapshot(), before);
    actor.send({ type: 'timer.fired', at: T0 + 60_500 });
    assert.deepEqual(work(actor), { kind: 'await_admission', lane: 'resume', environment: 'production' });
    assert.deepEqual(attemptsOf(actor, 'wait'), [
      { attempt: 1, fence: 1, claimedAt: T0, startedAt: T0, endedAt: T0 + 60_500, outcome: 'succeeded', error: null, evidence: { woke_at: T0 + 60_500 } },
    ]);
    actor.send({ type: 'run.admitted', at: T0 + 60_600 });
    assert.equal(dispatch(actor).fence, 2);
  });

  it('completes directly when the delay is the last step', () => {
    const actor = startActor(runInput([webhookStep('a'), delayStep('wait', 10)]));
    actor.send({ type: 'run.admitted', at: T0 });
    succeed(actor, T0 + 1);
    assert.equal(stateOf(actor), 'delaying');
    actor.send({ type: 'timer.fired', at: T0 + 11 });
    assert.equal(stateOf(actor), 'completed');
  });

  it('records webhook steps as skipped in a replay that skips side effects, and still runs actions', () => {
    const actor = startActor(runInput([webhookStep('a'), webhookStep('b'), delayStep('d', 5), actionStep('c'), webhookStep('e')], { skipSideEffects: true }));
    actor.send({ type: 'run.admitted', at: T0 });
    assert.equal(stateOf(actor), 'delaying', 'two skipped webhooks then the delay');
    assert.deepEqual(attemptsOf(actor, 'a').map((a) => [a.outcome, a.fence]), [['skipped', 1]]);
    assert.deepEqual(attemptsOf(actor, 'b').map((a) => [a.outcome, a.fence]), [['skipped', 2]]);
    actor.send({ type: 'timer.fired', at: T0 + 5 });
    actor.send({ type: 'run.admitted', at: T0 + 6 });
    const action = dispatch(actor);
    assert.equal(action.stepId, 'c');
    assert.equal(action.skipSideEffects, true);
    succeed(actor, T0 + 7);
    assert.equal(stateOf(actor), 'completed', 'the trailing webhook is skipped too');
    assert.deepEqual(actor.getSnapshot().context.steps.map((s) => s.status), ['skipped', 'skipped', 'succeeded', 'succeeded', 'skipped']);
  });

  it('accepts step.skipped from the shell for the open attempt', () => {
    const actor = startActor(runInput([actionStep('c'), webhookStep('d')]));
    actor.send({ type: 'run.admitted', at: T0 });
    actor.send({ type: 'step.skipped', stepId: asStepId('c'), fence: 1, reason: 'replay_skip_side_effects', at: T0 + 1 });
    assert.equal(attemptsOf(actor, 'c')[0]?.outcome, 'skipped');
    assert.deepEqual(attemptsOf(actor, 'c')[0]?.evidence, { reason: 'replay_skip_side_effects' });
    assert.equal(dispatch(actor).stepId, 'd');
  });
});

describe('run machine: advancing to the next step', () => {
  /** Every plan of up to three steps drawn from webhook, custom action and delay. */
  function allPlans(): RunStepPlan[][] {
    const kinds = [webhookStep, actionStep, (id: string) => delayStep(id, 10)];
    const plans: RunStepPlan[][] = [[]];
    for (let length = 1; length <= 3; length += 1) {
      for (let code = 0; code < 3 ** length; code += 1) {
        plans.push(Array.from({ length }, (_, i) => kinds[Math.floor(code / 3 ** i) % 3]!(`s${i}`)));
      }
    }
    return plans;
  }

  /** The state the context implies: where the cursor rests and what its open attempt is. */
  function impliedState(actor: RunActor): string {
    const { context } = actor.getSnapshot();
    const step = context.steps[context.currentIndex];
    if (step === undefined) return 'completed';
    // A delay's wake-up re-enters `queued` at the next step: the next admission skips or claims it.
    if (step.attempts.at(-1)?.outcome !== 'pending') return 'queued';
    return step.type === 'delay' ? 'delaying' : 'running';
  }

  it('lands each admission and finished step in the state its context implies, for every mix of steps', () => {
    let checked = 0;
    for (const skipSideEffects of [false, true]) {
      for (const plan of allPlans()) {
        const label = `${plan.map((s) => s.type).join(',') || 'no steps'} skipSideEffects=${skipSideEffects}`;
        const actor = startActor(runInput(plan, { skipSideEffects }));
        let now = T0;
        let reportSkip = false;
        while (actor.getSnapshot().status === 'active') {
          const state = stateOf(actor);
          if (state === 'queued') actor.send({ type: 'run.admitted', at: (now += 1) });
          else if (state === 'delaying') actor.send({ type: 'timer.fired', at: (now += 10) });
          else if ((reportSkip = !reportSkip)) succeed(actor, (now += 1));
          else actor.send({ type: 'step.skipped', stepId: dispatch(actor).stepId, fence: dispatch(actor).fence, reason: 'test', at: (now += 1) });
          assert.equal(stateOf(actor), impliedState(actor), label);
          checked += 1;
        }
        const statuses = actor.getSnapshot().context.steps.map((s) => s.status);
        assert.deepEqual(statuses.filter((s) => s !== 'succeeded' && s !== 'skipped'), [], label);
        if (skipSideEffects) assert.ok(plan.every((s, i) => s.type !== 'webhook' || attemptsOf(actor, s.id)[0]?.evidence !== null && statuses[i] === 'skipped'), label);
        assert.deepEqual(allFences(actor), plan.map((_, i) => i + 1), `${label}: one claim per step`);
      }
    }
    assert.ok(checked > 200, `checked ${checked} transitions`);
  });

  it('takes one microstep per admission and step report (no transient routing state)', () => {
    let microsteps = 0;
    const actor = createActor(runMachine, {
      input: runInput([webhookStep('a'), actionStep('b'), delayStep('d', 5), webhookStep('e')], { skipSideEffects: true }),
      inspect: (event) => {
        if (event.type === '@xstate.microstep') microsteps += 1;
      },
    }).start();
    const countOf = (send: () => void): number => {
      microsteps = 0;
      send();
      return microsteps;
    };
    assert.equal(countOf(() => actor.send({ type: 'run.admitted', at: T0 })), 1, 'admission (after a replay skip)');
    assert.equal(countOf(() => succeed(actor, T0 + 1)), 1, 'step report into a delay');
    assert.equal(countOf(() => actor.send({ type: 'timer.fired', at: T0 + 6 })), 1);
    assert.equal(countOf(() => actor.send({ type: 'run.admitted', at: T0 + 7 })), 1, 'admission that completes the run');
    assert.equal(stateOf(actor), 'completed');
  });
});
