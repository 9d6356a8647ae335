// A cancel answered as done means the run's webhook is not sent afterwards: a request still waiting
// for a connection (its org at the cap for that receiver) is dropped from the queue at once, unsent,
// and the run's record says so before any connection frees; the request already out completes as before.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call } from '../helpers/http.ts';
import { startQueuedWebhook, waitingRequests as waitingIn, type QueuedWebhookSetup } from '../helpers/queued-webhook.ts';
import { eventually } from '../helpers/receiver.ts';

const ORG = 'acct-cancel-queued';
let setup: QueuedWebhookSetup;

before(async () => {
  setup = await startQueuedWebhook(ORG);
});
after(async () => setup.close());

const waitingRequests = () => waitingIn(setup.rt);

async function runOf(eventId: string): Promise<{ run_id: string; state: string }> {
  const { rt, key } = setup;
  const runs = (await call(rt.url, 'GET', `/organizations/${ORG}/runs?limit=500`, { token: key })).body.runs as Array<{ run_id: string; state: string; event_id: string }>;
  const run = runs.find((r) => r.event_id === eventId);
  assert.ok(run !== undefined, `a run for ${eventId}`);
  return run;
}

test('a run cancelled while its webhook waits for a connection never sends it; the record says it was withdrawn', async () => {
  const { rt, key, receiver, releaseFirst } = setup;
  for (const id of ['evt_0000000000q1', 'evt_0000000000q2']) {
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.placed', payload: {}, id } })).status, 202);
  }
  await eventually('the first request out and the second waiting for its connection', async () => [receiver.received.length, await waitingRequests()], ([out, waiting]) => out === 1 && waiting === 1);
  const first = await runOf('evt_0000000000q1');
  const second = await runOf('evt_0000000000q2');
  assert.equal(receiver.received[0]?.headers['idempotency-key'], `${first.run_id}:send`);

  const cancelled = await call(rt.url, 'POST', `/organizations/${ORG}/runs/${second.run_id}/cancel`, { token: key });
  assert.equal(cancelled.status, 200, cancelled.text);
  assert.equal(cancelled.body.run.state, 'cancelled');
  // While the first request still holds the only connection: the withdrawn one left the queue at once.
  const view = await eventually(
    'the withdrawn attempt recorded',
    async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${second.run_id}`, { token: key })).body.run,
    (run) => run.steps[0].attempts[0].after_cancel?.outcome !== undefined,
  );
  assert.equal(await waitingRequests(), 0);
  assert.equal(receiver.received.length, 1, 'the first request is still out');
  releaseFirst();
  await eventually('the first run completed', () => runOf('evt_0000000000q1'), (run) => run.state === 'completed');
  const attempt = view.steps[0].attempts[0];
  assert.equal(attempt.started_at, null, 'it never started');
  assert.equal(attempt.after_cancel.outcome, 'failed');
  assert.equal(attempt.after_cancel.error.code, 'webhook_withdrawn');
  assert.deepEqual(receiver.received.map((r) => r.headers['idempotency-key']), [`${first.run_id}:send`], 'the cancelled run sent nothing');
});
