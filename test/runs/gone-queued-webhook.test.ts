// A run whose org is deleted, or whose sandbox is reset, while its webhook request waits for a
// connection leaves the queue at once, unsent, as a cancelled run's does: the waiting-requests gauge
// reads 0 while the request ahead of it still holds the connection. (A metrics probe found both counted for as long as the
// requests ahead of them hung, up to their timeout: a reset's runs kept their live actor, which
// said "still wanted", when their attempts were withdrawn; a deleted org's runs read as running in
// the ledger until the removal reached them.)

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../helpers/http.ts';
import { startQueuedWebhook, waitingRequests, type QueuedWebhookSetup } from '../helpers/queued-webhook.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN } from '../helpers/runtime.ts';

/** Two events: the first's request out (held by the receiver), the second's waiting for the connection. */
async function oneOutOneWaiting(setup: QueuedWebhookSetup, org: string, environment: 'production' | 'sandbox'): Promise<void> {
  const { rt, key, receiver } = setup;
  for (const id of ['evt_0000000gone1', 'evt_0000000gone2']) {
    const sent = await call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'order.placed', payload: {}, id, environment } });
    assert.equal(sent.status, 202, sent.text);
  }
  await eventually('the first request out and the second waiting', async () => [receiver.received.length, await waitingRequests(rt)], ([out, waiting]) => out === 1 && waiting === 1);
}

for (const [what, environment, end] of [
  ['its org is deleted', 'production', (setup: QueuedWebhookSetup, org: string) => call(setup.rt.url, 'DELETE', `/organizations/${org}`, { token: ADMIN_TOKEN })],
  ['its sandbox is reset', 'sandbox', (setup: QueuedWebhookSetup, org: string) => call(setup.rt.url, 'POST', `/organizations/${org}/sandbox/reset`, { token: setup.key })],
] as const) {
  test(`a request waiting for a connection when ${what} leaves the queue at once and is never sent`, async () => {
    const org = `acct-gone-${environment}`;
    const setup = await startQueuedWebhook(org, environment);
    try {
      await oneOutOneWaiting(setup, org, environment);
      const ended = await end(setup, org);
      assert.ok(ended.status === 200 || ended.status === 202, ended.text);
      // While the first request still holds the only connection.
      await eventually('no request waiting', () => waitingRequests(setup.rt), (waiting) => waiting === 0);
      assert.equal(setup.receiver.received.length, 1, 'the waiting request was not sent');
    } finally {
      await setup.close();
    }
  });
}
