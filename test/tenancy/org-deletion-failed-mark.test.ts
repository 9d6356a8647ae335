// An org's deletion fences it off while its mark is written. A run command or a run's next work
// that comes in that window waits for the mark, and goes on if the mark fails (the org stays). It
// was dropped as the deleted org's: the run stayed `running` or `queued` until the next restart.
// A transition the fence refused meanwhile stalls, as after a failed write, and is picked up again.
// A webhook request that gets its connection meanwhile is sent: withdrawn, it failed its run for good.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { FIRST_RETRY_MS } from '../../runtime/runs/stalled-runs.ts';
import { call, createOrg } from '../helpers/http.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { startQueuedWebhook } from '../helpers/queued-webhook.ts';
import { holdNextEventFlush } from '../helpers/unflushed-event.ts';
import { deletionHeld, queuedWritesRun } from '../helpers/held-deletion.ts';

const ORG = 'acct-failed-mark';
const DELAY_MS = 60_000;

async function withRuntime(body: (rt: TestRuntime, clock: ManualClock, key: string) => Promise<void>, environment = 'production'): Promise<void> {
  const clock = new ManualClock(Date.UTC(2026, 10, 1, 12));
  const rt = await startRuntime({ args: ['--runner', 'off'], clock });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'wait', environment, trigger_event: 'go', steps: [{ type: 'delay', duration_ms: DELAY_MS }] } });
    assert.equal(workflow.status, 201, workflow.text);
    await body(rt, clock, key);
  } finally {
    await rt.close();
  }
}

async function runOf(rt: TestRuntime, key: string, eventId: string, environment = 'production'): Promise<string> {
  const [reaction] = await eventually('the run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}?environment=${environment}`, { token: key })).body.reactions, (found: unknown[]) => found?.length === 1);
  return (reaction as { run_id: string }).run_id;
}

async function stateOf(rt: TestRuntime, key: string, runId: string, environment = 'production'): Promise<string> {
  return (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}?environment=${environment}`, { token: key })).body.run.state as string;
}

test('a timer that fires while the deletion is written waits for it, and its run completes when the mark fails', async () => {
  await withRuntime(async (rt, clock, key) => {
    const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'go', payload: {} } });
    assert.equal(sent.status, 202, sent.text);
    const runId = await runOf(rt, key, sent.body.event.id as string);
    await eventually('the delay armed', () => rt.runtime.engine.timerDueAt(ORG, runId), (due) => due !== undefined);

    const deletion = await deletionHeld(rt, ORG);
    try {
      clock.advance(DELAY_MS);
      assert.equal(rt.runtime.engine.timers.fireDue(), 1);
      deletion.release();
      assert.equal((await deletion.answer).status, 500);
    } finally {
      deletion.done();
    }
    await eventually('the run completed', () => stateOf(rt, key, runId), (state) => state === 'completed');
  });
});

test("a run whose event became durable while the deletion was written is picked up again when the mark fails", async () => {
  await withRuntime(async (rt, clock, key) => {
    const flush = holdNextEventFlush(rt.runtime.ledger, ORG);
    try {
      const sending = call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'go', payload: {} } });
      await flush.committed;
      const deletion = await deletionHeld(rt, ORG);
      try {
        // The event and its run are on disk now: the run's first work comes while the org is fenced off.
        flush.release();
        const sent = await sending;
        assert.equal(sent.status, 202, sent.text);
        deletion.release();
        assert.equal((await deletion.answer).status, 500);
      } finally {
        deletion.done();
      }
      const runId = await runOf(rt, key, (await sending).body.event.id as string);
      assert.equal(rt.runtime.engine.stalled.size, 1, 'the run waits to be picked up again');
      assert.equal(rt.runtime.engine.timerDueAt(ORG, runId), undefined);

      clock.advance(FIRST_RETRY_MS);
      rt.runtime.engine.stalled.timers.fireDue();
      await eventually('the delay armed', () => rt.runtime.engine.timerDueAt(ORG, runId), (due) => due !== undefined);
      clock.advance(DELAY_MS);
      rt.runtime.engine.timers.fireDue();
      await eventually('the run completed', () => stateOf(rt, key, runId), (state) => state === 'completed');
    } finally {
      flush.restore();
    }
  });
});

test('a transition the fence refused while the deletion was written stalls, and goes on when the mark fails', async () => {
  await withRuntime(async (rt, clock, key) => {
    const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'go', payload: {}, environment: 'sandbox' } });
    assert.equal(sent.status, 202, sent.text);
    const runId = await runOf(rt, key, sent.body.event.id as string, 'sandbox');
    await eventually('the delay armed', () => rt.runtime.engine.timerDueAt(ORG, runId), (due) => due !== undefined);

    // The timer's transition (a sandbox run's: a transaction) is held before it is issued, then
    // issued while the org is fenced off: the fence refuses it.
    const transition = gateNextCall(rt.runtime.ledger.root, 'transaction');
    try {
      clock.advance(DELAY_MS);
      assert.equal(rt.runtime.engine.timers.fireDue(), 1);
      await transition.whenReached;
      const deletion = await deletionHeld(rt, ORG);
      try {
        transition.release();
        await queuedWritesRun(rt.runtime.ledger.root);
        deletion.release();
        assert.equal((await deletion.answer).status, 500);
      } finally {
        deletion.done();
      }
    } finally {
      transition.done();
    }
    await eventually('the run stalled', () => rt.runtime.engine.stalled.size, (size) => size === 1);
    assert.equal(await stateOf(rt, key, runId, 'sandbox'), 'delaying');
    clock.advance(FIRST_RETRY_MS);
    rt.runtime.engine.stalled.timers.fireDue();
    // Picked up again, its delay (due already) is armed anew and fires.
    await eventually(
      'the run completed',
      () => {
        rt.runtime.engine.timers.fireDue();
        return stateOf(rt, key, runId, 'sandbox');
      },
      (state) => state === 'completed',
    );
  }, 'sandbox');
});

test('a webhook request that gets its connection while the deletion is written is sent, and its run completes when the mark fails', async () => {
  const org = 'acct-failed-mark-queued';
  const setup = await startQueuedWebhook(org);
  const { rt, key, receiver } = setup;
  try {
    for (const id of ['evt_000000marked1', 'evt_000000marked2']) {
      const sent = await call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'order.placed', payload: {}, id } });
      assert.equal(sent.status, 202, sent.text);
    }
    await eventually('the first request out, the second waiting for the connection', () => receiver.received.length, (count) => count === 1);
    const deletion = await deletionHeld(rt, org);
    try {
      // The first answer frees the one connection: the second request gets it while the org is fenced off.
      setup.releaseFirst();
      await eventually('the second request sent', () => receiver.received.length, (count) => count === 2);
      deletion.release();
      assert.equal((await deletion.answer).status, 500);
    } finally {
      deletion.done();
    }
    const states = async (): Promise<string[]> => ((await call(rt.url, 'GET', `/organizations/${org}/runs`, { token: key })).body.runs as Array<{ state: string }>).map((run) => run.state);
    await eventually('both runs completed', states, (found) => found.length === 2 && found.every((state) => state === 'completed'));
  } finally {
    await setup.close();
  }
});
