// A run keeps the custom action version it ran since it was created or last resumed
// (pinnedActionVersion): the attempts since a resume are told by fence, so a clock set back after a
// resume does not make the run forget the version it ran and take another one mid-run.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { asStepId } from '../../actors/ids.ts';
import { applyRunEvent, startRun, type PersistedRun } from '../../actors/run-transition.ts';
import { pinnedActionVersion } from '../../runtime/runs/custom-action-step.ts';
import { actionStep, runInput, T0 } from '../actors/run-fixtures.ts';

/** The run's open attempt answered by the runner with `version` (evidence as runCustomAction gives it), failing. */
function ranVersion(run: PersistedRun, version: number, retryable: boolean, at: number): PersistedRun {
  const evidence = { action_id: 'score', version, digest: 'a'.repeat(64), replayed: false };
  const error = { code: 'custom_action_trap', message: 'trapped', retryable };
  return applyRunEvent(run, { type: 'step.failed', stepId: asStepId('s'), fence: run.context.fence, error, evidence, at }).run;
}

test('the version run since the last resume stays pinned when the clock was set back after that resume', () => {
  let run = applyRunEvent(startRun(runInput([actionStep('s')])).run, { type: 'run.admitted', at: T0 }).run;
  run = ranVersion(run, 2, false, T0 + 1);
  assert.equal(run.value, 'failed');
  assert.equal(pinnedActionVersion(run.context, 'score'), 2);
  run = applyRunEvent(run, { type: 'run.resume', at: T0 + 10_000 }).run;
  assert.equal(pinnedActionVersion(run.context, 'score'), undefined, 'a resume picks the approved version afresh');
  // An hour back: the next claim is timed before the resume.
  const back = T0 + 10_000 - 3_600_000;
  run = applyRunEvent(run, { type: 'run.admitted', at: back }).run;
  run = ranVersion(run, 3, true, back + 1);
  assert.equal(run.value, 'backoff');
  assert.equal(pinnedActionVersion(run.context, 'score'), 3, 'its retries keep version 3');
});
