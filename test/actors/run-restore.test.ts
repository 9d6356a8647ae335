// Crash and reboot of runs: persisted snapshot -> JSON -> restore at every state gives the
// same pendingWork; interrupted steps are reclaimed under higher fences; nothing completes twice.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asStepId } from '../../actors/ids.ts';
import { applyRunEvent, readPersistedRun, startRun, type PersistedRun } from '../../actors/run-transition.ts';
import type { RunEvent } from '../../actors/run-types.ts';
import { describeRun } from '../../actors/run-view.ts';
import { holdsSlot, pendingWork } from '../../actors/run-work.ts';
import {
  actionStep,
  allFences,
  attemptsOf,
  delayStep,
  dispatch,
  restart,
  runInput,
  startActor,
  stateOf,
  T0,
  webhookStep,
  type RunActor,
} from './run-fixtures.ts';
import { assertRetryDue } from '../helpers/retry-due.ts';

const persisted = (actor: RunActor): PersistedRun => readPersistedRun(JSON.parse(JSON.stringify(actor.getPersistedSnapshot())));

/** The next event for the open attempt, built from its pendingWork (as the shell would). */
function report(actor: RunActor, outcome: 'ok' | 'retry' | 'fatal', at: number): RunEvent {
  const d = dispatch(actor);
  const base = { stepId: d.stepId, fence: d.fence, at };
  if (outcome === 'ok') return { type: 'step.succeeded', ...base, result: { n: d.fence }, evidence: { status: 200 } };
  return { type: 'step.failed', ...base, error: { code: 'boom', message: 'boom', retryable: outcome === 'retry' } };
}

describe('snapshot round trip', () => {
  it('restores at every state with identical pendingWork and view, and continues from there', () => {
    const input = runInput([webhookStep('a'), delayStep('d', 5000), actionStep('c')]);
    let actor = startActor(input);
    let pure = startRun(input).run;
    const seen = new Set<string>();
    let now = T0;
    const script: Array<(a: RunActor) => RunEvent> = [
      () => ({ type: 'run.admitted', at: (now += 1) }),
      (a) => ({ type: 'step.started', stepId: dispatch(a).stepId, fence: dispatch(a).fence, at: (now += 1) }),
      (a) => report(a, 'retry', (now += 1)),
      () => ({ type: 'timer.fired', at: (now += 1000) }),
      () => ({ type: 'run.admitted', at: (now += 1) }),
      (a) => report(a, 'ok', (now += 1)),
      () => ({ type: 'timer.fired', at: (now += 5000) }),
      () => ({ type: 'run.admitted', at: (now += 1) }),
      (a) => report(a, 'fatal', (now += 1)),
      () => ({ type: 'run.resume', at: (now += 1) }),
      () => ({ type: 'run.admitted', at: (now += 1) }),
      (a) => report(a, 'ok', (now += 1)),
    ];
    for (const next of script) {
      const event = next(actor);
      actor.send(event);
      pure = applyRunEvent(pure, event).run;
      const before = { work: pendingWork(actor.getSnapshot()), view: describeRun(actor.getSnapshot()), stored: persisted(actor) };
      seen.add(stateOf(actor));

      actor = restart(actor);
      assert.deepEqual(pendingWork(actor.getSnapshot()), before.work, `work after restore in ${before.view.state}`);
      assert.deepEqual(pendingWork(before.stored), before.work, 'work from the stored JSON alone');
      assert.deepEqual(describeRun(actor.getSnapshot()), before.view);
      assert.deepEqual(pure, before.stored, 'the pure transition path stores the same snapshot');
    }
    assert.deepEqual([...seen].sort(), ['backoff', 'completed', 'delaying', 'failed', 'queued', 'running']);
    assert.deepEqual(allFences(actor), [1, 2, 3, 4, 5]);
    assert.deepEqual(attemptsOf(actor, 'a').map((x) => x.outcome), ['failed', 'succeeded']);
  });

  it('round-trips a cancelled run as done', () => {
    const actor = restart(startActor(runInput([webhookStep('a')])));
    actor.send({ type: 'run.cancel', at: T0 + 1 });
    const restored = restart(actor);
    assert.equal(restored.getSnapshot().status, 'done');
    assert.deepEqual(pendingWork(restored.getSnapshot()), { kind: 'done' });
  });
});

describe('recovery after a crash', () => {
  it('re-dispatches an interrupted step with a higher fence and the same key, never a completed one', () => {
    const actor = startActor(runInput([webhookStep('a'), webhookStep('b'), webhookStep('c')]));
    actor.send({ type: 'run.admitted', at: T0 });
    actor.send(report(actor, 'ok', T0 + 1));
    const interrupted = dispatch(actor);
    actor.send({ type: 'step.started', stepId: interrupted.stepId, fence: interrupted.fence, at: T0 + 2 });
    assert.equal(holdsSlot(actor.getSnapshot()), true);

    // kill -9: only the stored snapshot survives; the rest continues through the pure path.
    const stored = persisted(actor);
    assert.deepEqual(pendingWork(stored), interrupted);
    const recovered = applyRunEvent(stored, { type: 'run.recovered', at: T0 + 10_000 });
    assert.equal(recovered.changed, true);
    assert.deepEqual(recovered.work, { kind: 'await_admission', lane: 'resume', environment: 'production' });
    assert.equal(holdsSlot(recovered.run), false);

    const admitted = applyRunEvent(recovered.run, { type: 'run.admitted', at: T0 + 10_001 });
    assert.equal(admitted.work.kind, 'dispatch_step');
    if (admitted.work.kind !== 'dispatch_step') return;
    assert.equal(admitted.work.stepId, 'b');
    assert.equal(admitted.work.idempotencyKey, interrupted.idempotencyKey);
    assert.ok(admitted.work.fence > interrupted.fence, 'higher fence');
    assert.equal(admitted.work.attempt, 2);

    const b = admitted.run.context.steps[1];
    assert.deepEqual(b?.attempts.map((x) => [x.outcome, x.fence, x.endedAt]), [['abandoned', 2, T0 + 10_000], ['pending', 3, null]]);
    assert.deepEqual(b?.attempts[0]?.evidence, { reason: 'runtime_restarted', effect_sent: 'unknown' }, 'the abandoned attempt says why, and that nobody knows whether it went out');
    assert.equal(admitted.run.context.steps[0]?.attempts.length, 1, 'step a is never executed again');

    const late = applyRunEvent(admitted.run, { type: 'step.succeeded', stepId: asStepId('b'), fence: interrupted.fence, result: 'pre-crash', at: T0 + 10_002 });
    assert.equal(late.changed, false, 'the pre-crash attempt cannot complete the step');
  });

  it('keeps raising the fence across repeated crashes of the same step', () => {
    let run = applyRunEvent(startRun(runInput([actionStep('a')])).run, { type: 'run.admitted', at: T0 }).run;
    const fences: number[] = [];
    for (let crash = 1; crash <= 3; crash += 1) {
      const work = pendingWork(run);
      assert.equal(work.kind, 'dispatch_step');
      if (work.kind === 'dispatch_step') fences.push(work.fence);
      run = applyRunEvent(run, { type: 'run.recovered', at: T0 + crash * 100 }).run;
      run = applyRunEvent(run, { type: 'run.admitted', at: T0 + crash * 100 + 1 }).run;
    }
    assert.deepEqual(fences, [1, 2, 3]);
    assert.deepEqual(run.context.steps[0]?.attempts.map((x) => x.outcome), ['abandoned', 'abandoned', 'abandoned', 'pending']);
    assert.equal(run.context.steps[0]?.failures, 0, 'a crash is not the step failing');
  });

  it('fails the run at the fifth attempt of a step in a row a restart cut off (a step that crashes the process is not sent forever); a resume starts the count again', () => {
    let run = applyRunEvent(startRun(runInput([webhookStep('a')])).run, { type: 'run.admitted', at: T0 }).run;
    for (let crash = 1; crash <= 4; crash += 1) {
      run = applyRunEvent(run, { type: 'run.recovered', at: T0 + crash * 100 }).run;
      assert.equal(run.value, 'queued', `restart ${crash}: sent again`);
      run = applyRunEvent(run, { type: 'run.admitted', at: T0 + crash * 100 + 1 }).run;
    }
    const fifth = applyRunEvent(run, { type: 'run.recovered', at: T0 + 500 });
    assert.equal(fifth.run.value, 'failed');
    assert.deepEqual(fifth.work, { kind: 'none' });
    assert.deepEqual({ ...fifth.run.context.error, message: undefined }, { code: 'step_interrupted_repeatedly', stepId: 'a', reason: 'retries_exhausted', message: undefined });
    assert.match(fifth.run.context.error!.message, /^The runtime went down \(not a clean stop\) during 5 attempts of step "a" in a row .*Resume the run once the cause is known\.$/);
    assert.deepEqual(fifth.run.context.steps[0]?.attempts.map((x) => x.outcome), ['abandoned', 'abandoned', 'abandoned', 'abandoned', 'abandoned']);
    assert.equal(fifth.run.context.steps[0]?.status, 'failed');

    // A person resumes it: four more restarts are tolerated before it fails again.
    run = applyRunEvent(applyRunEvent(fifth.run, { type: 'run.resume', at: T0 + 1000 }).run, { type: 'run.admitted', at: T0 + 1001 }).run;
    assert.equal(pendingWork(run).kind, 'dispatch_step');
    run = applyRunEvent(run, { type: 'run.recovered', at: T0 + 1100 }).run;
    assert.equal(run.value, 'queued', 'attempts before the resume do not count');
  });

  it('counts the attempts since a resume by fence: with the clock set back after a resume, the fifth restart in a row still fails the run', () => {
    const crashFiveTimes = (from: PersistedRun, at: (crash: number) => number): PersistedRun => {
      let run = from;
      for (let crash = 1; crash <= 5; crash += 1) {
        run = applyRunEvent(run, { type: 'run.recovered', at: at(crash) }).run;
        if (run.value === 'failed') break;
        run = applyRunEvent(run, { type: 'run.admitted', at: at(crash) + 1 }).run;
      }
      return run;
    };
    const admitted = applyRunEvent(startRun(runInput([webhookStep('a')])).run, { type: 'run.admitted', at: T0 }).run;
    const failed = crashFiveTimes(admitted, (crash) => T0 + crash * 100);
    assert.equal(failed.value, 'failed');
    const resumed = applyRunEvent(applyRunEvent(failed, { type: 'run.resume', at: T0 + 10_000 }).run, { type: 'run.admitted', at: T0 + 10_001 }).run;
    assert.equal(resumed.context.resumedAtFence, 5, 'the fence when resumed');
    // An hour back: every later claim is timed before the resume.
    const back = crashFiveTimes(resumed, (crash) => T0 + 10_000 - 3_600_000 + crash * 100);
    assert.equal(back.value, 'failed', 'five restarts in a row since the resume');
    assert.equal(back.context.steps[0]?.attempts.filter((x) => x.outcome === 'abandoned').length, 10);
    // A run resumed by an earlier release holds no fence: times are compared, as then.
    const { resumedAtFence: _fence, ...earlier } = resumed.context;
    const earlierRun = { ...resumed, context: earlier } as PersistedRun;
    assert.equal(crashFiveTimes(earlierRun, (crash) => T0 + 10_000 + crash * 100).value, 'failed');
  });

  it('counts only attempts a crash cut off: those a clean stop or a start cut off left neither count nor break the row, and say so', () => {
    let run = applyRunEvent(startRun(runInput([webhookStep('a')])).run, { type: 'run.admitted', at: T0 }).run;
    const restart = (cause: 'crashed' | 'stopped' | 'start_cut_off', at: number): PersistedRun => {
      const recovered = applyRunEvent(run, { type: 'run.recovered', at, cause }).run;
      return recovered.value === 'failed' ? recovered : applyRunEvent(recovered, { type: 'run.admitted', at: at + 1 }).run;
    };
    // Twelve stops and starts cut off, four crashes among them: never five crashes, so never failed.
    const causes = ['stopped', 'crashed', 'start_cut_off', 'start_cut_off', 'crashed', 'stopped', 'stopped', 'crashed', 'start_cut_off', 'stopped', 'crashed', 'stopped'] as const;
    causes.forEach((cause, i) => {
      run = restart(cause, T0 + (i + 1) * 100);
      assert.equal(run.value, 'running', `restart ${i + 1} (${cause}): sent again`);
    });
    const evidence = run.context.steps[0]!.attempts.slice(0, 4).map((x) => x.evidence);
    assert.deepEqual(evidence, [
      { reason: 'runtime_stopped', effect_sent: 'unknown' },
      { reason: 'runtime_restarted', effect_sent: 'unknown' },
      { reason: 'runtime_start_interrupted', effect_sent: 'no' },
      { reason: 'runtime_start_interrupted', effect_sent: 'no' },
    ]);
    // The fifth crash, however many stops lie between the crashes.
    run = restart('crashed', T0 + 10_000);
    assert.equal(run.value, 'failed');
    assert.equal(run.context.error?.code, 'step_interrupted_repeatedly');
  });

  it('leaves timers and queued runs alone: the absolute due time survives the restart', () => {
    const input = runInput([webhookStep('a'), delayStep('d', 60_000), webhookStep('b')]);
    const queued = startRun(input).run;
    const backoff = applyRunEvent(applyRunEvent(queued, { type: 'run.admitted', at: T0 }).run, {
      type: 'step.failed', stepId: asStepId('a'), fence: 1, error: { code: 'timeout', message: 't', retryable: true }, at: T0 + 5,
    }).run;
    const retryAt = assertRetryDue(backoff.context.retryAt, T0 + 5, 1000);
    const delaying = applyRunEvent(applyRunEvent(applyRunEvent(backoff, { type: 'timer.fired', at: T0 + 1005 }).run, { type: 'run.admitted', at: T0 + 1006 }).run, {
      type: 'step.succeeded', stepId: asStepId('a'), fence: 2, result: null, at: T0 + 1007,
    }).run;
    for (const [run, expected] of [
      [queued, { kind: 'await_admission', lane: 'new', environment: 'production' }],
      [backoff, { kind: 'arm_timer', at: retryAt, reason: 'retry' }],
      [delaying, { kind: 'arm_timer', at: T0 + 61_007, reason: 'delay' }],
    ] as const) {
      const step = applyRunEvent(run, { type: 'run.recovered', at: T0 + 999_999 });
      assert.equal(step.changed, false);
      assert.equal(step.run, run);
      assert.deepEqual(step.work, expected);
    }
  });

  it('changes nothing when events reach a finished run', () => {
    const admitted = applyRunEvent(startRun(runInput([actionStep('a')])).run, { type: 'run.admitted', at: T0 }).run;
    const done = applyRunEvent(admitted, { type: 'step.succeeded', stepId: asStepId('a'), fence: 1, result: 1, at: T0 + 1 }).run;
    assert.equal(done.status, 'done');
    for (const event of [{ type: 'run.cancel', at: T0 + 2 }, { type: 'run.resume', at: T0 + 2 }, { type: 'run.recovered', at: T0 + 2 }] as const) {
      const step = applyRunEvent(done, event);
      assert.equal(step.changed, false);
      assert.deepEqual(step.work, { kind: 'done' });
    }
  });

  it('refuses stored values that are not run snapshots', () => {
    assert.throws(() => readPersistedRun(null), TypeError);
    assert.throws(() => readPersistedRun({ status: 'active', value: 'advancing', context: {} }), TypeError);
    assert.throws(() => readPersistedRun({ status: 'active', value: 'queued', context: { runId: 'r' } }), TypeError);
  });
});
