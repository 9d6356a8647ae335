// A runtime where an org's second webhook request waits for a connection: one connection per org
// and receiver (`--webhook-connections 1`), a receiver that holds the first request until released,
// and a workflow with one webhook step to it, on `order.placed` (in production unless told). For
// tests of what happens to a request while it waits (a cancel, a rotation, a deletion, a reset).

import assert from 'node:assert/strict';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from './runtime.ts';
import { call, createOrg } from './http.ts';
import { startReceiver, type Receiver } from './receiver.ts';

export interface QueuedWebhookSetup {
  readonly rt: TestRuntime;
  /** The org's admin API key. */
  readonly key: string;
  readonly receiver: Receiver;
  readonly workflowId: string;
  /** The workflow's signing secret as created. */
  readonly signingSecret: string;
  /** Lets the receiver answer the first request (200); later ones are answered at once. */
  readonly releaseFirst: () => void;
  /** Releases the first request, stops the runtime and the receiver. */
  close(): Promise<void>;
}

export async function startQueuedWebhook(org: string, environment: 'production' | 'sandbox' = 'production'): Promise<QueuedWebhookSetup> {
  const rt = await startRuntime({ args: ['--webhook-connections', '1'] });
  const key = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  let releaseFirst: () => void = () => undefined;
  const receiver = await startReceiver([{ status: 200, body: '{}', after: new Promise<void>((resolve) => (releaseFirst = resolve)) }, { status: 200, body: '{}' }]);
  const workflow = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'notify', trigger_event: 'order.placed', environment, steps: [{ id: 'send', type: 'webhook', url: receiver.url }] } });
  assert.equal(workflow.status, 201, workflow.text);
  return {
    rt,
    key,
    receiver,
    workflowId: workflow.body.workflow.id,
    signingSecret: workflow.body.signing_secret,
    releaseFirst: () => releaseFirst(),
    close: async () => {
      releaseFirst();
      await rt.close();
      await receiver.close();
    },
  };
}

/** Webhook requests of the runtime waiting for a connection (its /metrics gauge). */
export async function waitingRequests(rt: TestRuntime): Promise<number> {
  const text = (await call(rt.url, 'GET', '/metrics', { token: ADMIN_TOKEN })).text;
  return Number(/^sluice_webhook_requests_waiting (\d+)/m.exec(text)?.[1] ?? NaN);
}
