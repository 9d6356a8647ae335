// A webhook request signs with the workflow's secrets of when it leaves, as it takes its timestamp
// then: one that waited for a connection while the secret was rotated twice carries the new and the
// previous secret's signatures, and not the first secret's, which the second rotation dropped (a
// workflow-lifecycle probe found it signed by the secrets read when its attempt began).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';

const ORG = 'acct-rotate-queued';
let rt: TestRuntime;
let key: string;
let receiver: Receiver;
let workflowId: string;
let firstSecret: string;
let releaseFirst: () => void = () => undefined;

before(async () => {
  // One connection per org and receiver: the second run's request waits for the first's.
  rt = await startRuntime({ args: ['--webhook-connections', '1'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  receiver = await startReceiver([{ status: 200, body: '{}', after: new Promise<void>((resolve) => (releaseFirst = resolve)) }, { status: 200, body: '{}' }]);
  const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'notify', trigger_event: 'order.placed', steps: [{ id: 'send', type: 'webhook', url: receiver.url }] } });
  assert.equal(workflow.status, 201, workflow.text);
  workflowId = workflow.body.workflow.id;
  firstSecret = workflow.body.signing_secret;
});
after(async () => {
  releaseFirst();
  await rt.close();
  await receiver.close();
});

const waitingRequests = async (): Promise<number> => {
  const text = (await call(rt.url, 'GET', '/metrics', { token: ADMIN_TOKEN })).text;
  return Number(/^sluice_webhook_requests_waiting (\d+)/m.exec(text)?.[1] ?? NaN);
};

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
  for (const id of ['evt_00000000rot1', 'evt_00000000rot2']) {
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.placed', payload: {}, id } })).status, 202);
  }
  await eventually('the first request out and the second waiting for its connection', async () => [receiver.received.length, await waitingRequests()], ([out, waiting]) => out === 1 && waiting === 1);

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
