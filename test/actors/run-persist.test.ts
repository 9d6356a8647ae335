// persistedRunOf (the shell's shortcut past XState's getPersistedSnapshot) against XState itself:
// after every transition of runs that go through each state, the same record, key for key, in order.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { persistedRunOf, persistSnapshot } from '../../actors/run-transition.ts';
import { delayStep, failStep, runInput, startActor, succeed, T0, webhookStep, type RunActor } from './run-fixtures.ts';

/** Checks the shortcut at every snapshot the actor emits from now on; returns how many it checked. */
function checkEverySnapshot(actor: RunActor): () => number {
  let checked = 0;
  const compare = (): void => {
    const ours = persistedRunOf(actor);
    const xstate = persistSnapshot(actor.getPersistedSnapshot());
    assert.deepEqual(ours, xstate, `in state ${String(actor.getSnapshot().value)}`);
    assert.deepEqual(Object.keys(ours), Object.keys(xstate), 'the same keys in the same order (the same stored bytes)');
    checked += 1;
  };
  compare();
  actor.subscribe(compare);
  return () => checked;
}

test('every state a run passes through persists as XState persists it', () => {
  const actor = startActor(runInput([webhookStep('notify'), delayStep('wait', 1000), webhookStep('close')]));
  const checked = checkEverySnapshot(actor);
  actor.send({ type: 'run.admitted', at: T0 + 1 });
  failStep(actor, T0 + 2, true);
  actor.send({ type: 'timer.fired', at: T0 + 5000 });
  actor.send({ type: 'run.admitted', at: T0 + 5001 });
  succeed(actor, T0 + 5002);
  actor.send({ type: 'timer.fired', at: T0 + 7000 });
  actor.send({ type: 'run.admitted', at: T0 + 7001 });
  failStep(actor, T0 + 7002, false);
  assert.equal(actor.getSnapshot().value, 'failed');
  actor.send({ type: 'run.resume', at: T0 + 8000 });
  actor.send({ type: 'run.admitted', at: T0 + 8001 });
  succeed(actor, T0 + 8002);
  assert.equal(actor.getSnapshot().value, 'completed');
  assert.equal(actor.getSnapshot().status, 'done');
  assert.ok(checked() >= 12, `checked ${checked()} snapshots`);
});

test('a cancelled run persists as XState persists it', () => {
  const actor = startActor(runInput([webhookStep('notify')]));
  const checked = checkEverySnapshot(actor);
  actor.send({ type: 'run.admitted', at: T0 + 1 });
  actor.send({ type: 'run.cancel', at: T0 + 2, reason: 'user asked' });
  assert.equal(actor.getSnapshot().value, 'cancelled');
  assert.ok(checked() >= 3);
});
