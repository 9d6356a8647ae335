// describeRun: the snake_case API view with every attempt of every step, JSON-safe.
// Checked on a run with a retry and a non-retryable failure, so errors and evidence show.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeRun } from '../../actors/run-view.ts';
import { actionStep, failStep, restart, runInput, startActor, succeed, T0, webhookStep } from './run-fixtures.ts';
import { assertRetryDue } from '../helpers/retry-due.ts';

describe('describeRun', () => {
  it('shows state, current step, fence, error and all attempts in snake_case', () => {
    const actor = startActor(runInput([webhookStep('a'), actionStep('b')]));
    actor.send({ type: 'run.admitted', at: T0 });
    succeed(actor, T0 + 1_000, { status: 202 });
    failStep(actor, T0 + 2_000, true, 500);
    // A Retry-After below 1 s waits 1 s (retry-policy.ts); the attempt still records the hint given.
    actor.send({ type: 'timer.fired', at: T0 + 3_000 });
    actor.send({ type: 'run.admitted', at: T0 + 3_100 });
    failStep(actor, T0 + 3_500, false);

    const view = describeRun(restart(actor).getSnapshot());
    assert.deepEqual(JSON.parse(JSON.stringify(view)), view, 'JSON-safe');
    assert.equal(view.state, 'failed');
    assert.deepEqual(view.current_step, { id: 'b', index: 1, type: 'custom_action' });
    assert.equal(view.fence, 3);
    assert.deepEqual(view.error, { code: 'http_400', message: 'Bad Request', step_id: 'b', reason: 'non_retryable' });
    assert.equal(view.workflow_version, 3);
    assert.equal(view.created_at, '2025-01-01T00:00:00.000Z');
    assert.equal(view.retry_at, null);

    const [a, b] = view.steps;
    assert.deepEqual(a, {
      id: 'a',
      index: 0,
      type: 'webhook',
      status: 'succeeded',
      result: { status: 202 },
      attempts: [
        { attempt: 1, fence: 1, claimed_at: '2025-01-01T00:00:00.000Z', started_at: null, ended_at: '2025-01-01T00:00:01.000Z', outcome: 'succeeded', error: null, evidence: { status: 200 }, after_cancel: null },
      ],
      earlier_attempts_dropped: 0,
    });
    assert.equal(b?.status, 'failed');
    assert.deepEqual(b?.attempts.map((x) => [x.attempt, x.fence, x.outcome, x.error?.code, x.error?.retry_after_ms]), [
      [1, 2, 'failed', 'http_503', 500],
      [2, 3, 'failed', 'http_400', null],
    ]);
  });

  it('shows retry_at while in backoff and no current step once completed', () => {
    const actor = startActor(runInput([webhookStep('a')]));
    actor.send({ type: 'run.admitted', at: T0 });
    failStep(actor, T0, true);
    const retryAt = describeRun(actor.getSnapshot()).retry_at;
    assert.equal(retryAt, new Date(assertRetryDue(Date.parse(retryAt ?? ''), T0, 1000)).toISOString());
    actor.send({ type: 'timer.fired', at: T0 + 1000 });
    actor.send({ type: 'run.admitted', at: T0 + 1000 });
    succeed(actor, T0 + 1001);
    const view = describeRun(actor.getSnapshot());
    assert.equal(view.state, 'completed');
    assert.equal(view.current_step, null);
  });
});
