// A webhook request signs with the workflow's secrets of when it leaves, as it takes its timestamp
// then: one that waited for a connection while the secret was rotated twice carries the new and the
// previous secret's signatures, and not the first secret's, which the second rotation dropped (a
// workflow-lifecycle probe found it signed by the secrets read when its attempt began).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { call } from '../helpers/http.ts';
import { startQueuedWebhook, waitingRequests, type QueuedWebhookSetup } from '../helpers/queued-webhook.ts';
import { eventually } from '../helpers/receiver.ts';

const ORG = 'acct-rotate-queued';
let setup: QueuedWebhookSetup;

before(async () => {
  setup = await startQueuedWebhook(ORG);
});
after(async () => setup.close());

/** Whether `secret` verifies the request the receiver got (the standardwebhooks package, which also checks the timestamp is recent). */
const verifies = (secret: string, request: { readonly headers: Record<string, unknown>; readonly body: string }): boolean => {
  try {
    new Webhook(secret).verify(request.body, request.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
};

test('a request that waited for its connection across two rotations is signed by the new and the previous secret, not the dropped one', async () => {
  const { rt, key, receiver, workflowId, signingSecret: firstSecret, releaseFirst } = setup;
  for (const id of ['evt_00000000rot1', 'evt_00000000rot2']) {
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.placed', payload: {}, id } })).status, 202);
  }
  await eventually('the first request out and the second waiting for its connection', async () => [receiver.received.length, await waitingRequests(rt)], ([out, waiting]) => out === 1 && waiting === 1);

  const secrets: string[] = [];
  for (let i = 0; i < 2; i++) {
    const rotated = await call(rt.url, 'POST', `/organizations/${ORG}/workflows/${workflowId}/signing-secret/rotate`, { token: key });
    assert.equal(rotated.status, 200, rotated.text);
    secrets.push(rotated.body.signing_secret);
  }
  const [previous, current] = secrets as [string, string];
  assert.ok(verifies(firstSecret, receiver.received[0]!), 'the first request left before the rotations');

  releaseFirst();
  await eventually('the second request out', async () => receiver.received.length, (count) => count === 2);
  const second = receiver.received[1]!;
  assert.equal(String(second.headers['webhook-signature']).split(' ').length, 2, 'two signatures: the new secret and the previous');
  assert.deepEqual([current, previous, firstSecret].map((secret) => verifies(secret, second)), [true, true, false]);
});
