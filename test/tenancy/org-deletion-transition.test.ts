// A run transition whose write the org fence refuses, because its org was deleted while the
// transition was under way (here held just before its transaction is issued; a probe saw it with
// transactions waiting for their turn, whose callbacks run later), lets go of the run quietly. It
// was logged at error level as `run transition failed`, once per run in flight, for a deliberate
// offboarding (found by a probe). One refused while the mark is still being written waits for the
// mark before it is dropped (a failed mark leaves the org: org-deletion-failed-mark.test.ts).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { capturedLog } from '../helpers/captured-log.ts';
import { call, createOrg } from '../helpers/http.ts';
import { deletionHeld, queuedWritesRun } from '../helpers/held-deletion.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-gone-mid-write';

test('a transition whose write waited while its org was deleted drops the run without an error line', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 1, 12));
  const { logger, lines } = capturedLog();
  const rt = await startRuntime({ args: ['--runner', 'off'], clock, logger });
  let gate: ReturnType<typeof gateNextCall> | undefined;
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'wait', environment: 'sandbox', trigger_event: 'go', steps: [{ type: 'delay', duration_ms: 60_000 }] } });
    assert.equal(workflow.status, 201, workflow.text);
    const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'go', payload: {}, environment: 'sandbox' } });
    assert.equal(sent.status, 202, sent.text);
    const eventId = sent.body.event.id as string;
    const [reaction] = await eventually('the run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}?environment=sandbox`, { token: key })).body.reactions, (found: unknown[]) => found?.length === 1);
    const runId = (reaction as { run_id: string }).run_id;
    await eventually('the delay armed', () => rt.runtime.engine.timerDueAt(ORG, runId), (due) => due !== undefined);

    // The timer's transition (a sandbox run's: a transaction) is held before it is issued, the org deleted meanwhile.
    gate = gateNextCall(rt.runtime.ledger.root, 'transaction');
    clock.advance(60_000);
    assert.equal(rt.runtime.engine.timers.fireDue(), 1);
    await gate.whenReached;
    assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}`, { token: ADMIN_TOKEN })).status, 202);
    gate.release();

    const told = await eventually('the transition over', () => lines.filter((line) => line.message.startsWith('run transition')), (found) => found.length > 0);
    assert.deepEqual(told, [{ level: 'debug', message: 'run transition dropped: its organization was deleted meanwhile' }]);
    assert.deepEqual(lines.filter((line) => line.level === 'error' || line.level === 'warn'), []);
  } finally {
    gate?.done();
    await rt.close();
  }
});

test('a transition refused while the deletion is still being written waits for the mark, and is dropped quietly once it is', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 1, 12));
  const { logger, lines } = capturedLog();
  const rt = await startRuntime({ args: ['--runner', 'off'], clock, logger });
  const gates: Array<{ done: () => void }> = [];
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'wait', environment: 'sandbox', trigger_event: 'go', steps: [{ type: 'delay', duration_ms: 60_000 }] } });
    assert.equal(workflow.status, 201, workflow.text);
    const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'go', payload: {}, environment: 'sandbox' } });
    const [reaction] = await eventually('the run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${sent.body.event.id as string}?environment=sandbox`, { token: key })).body.reactions, (found: unknown[]) => found?.length === 1);
    const runId = (reaction as { run_id: string }).run_id;
    await eventually('the delay armed', () => rt.runtime.engine.timerDueAt(ORG, runId), (due) => due !== undefined);

    const transition = gateNextCall(rt.runtime.ledger.root, 'transaction');
    gates.push(transition);
    clock.advance(60_000);
    assert.equal(rt.runtime.engine.timers.fireDue(), 1);
    await transition.whenReached;
    // The mark is held before its write is issued: the org is fenced off, not yet marked.
    const deletion = await deletionHeld(rt, ORG, false);
    gates.push(deletion);
    transition.release();
    // Once the writes queued before are over, the transition was refused.
    await queuedWritesRun(rt.runtime.ledger.root);
    deletion.release();
    assert.equal((await deletion.answer).status, 202);

    const told = await eventually('the transition over', () => lines.filter((line) => line.message.startsWith('run transition')), (found) => found.length > 0);
    assert.deepEqual(told, [{ level: 'debug', message: 'run transition dropped: its organization was deleted meanwhile' }]);
    assert.deepEqual(lines.filter((line) => line.level === 'error' || line.level === 'warn'), []);
    assert.equal(rt.runtime.engine.stalled.size, 0, 'nothing waits to be picked up again');
  } finally {
    for (const gate of gates) gate.done();
    await rt.close();
  }
});
