// The writes that take no options (sandbox reset, resume, cancel, token and secret rotation,
// transport replay) refuse a body that asks for something, as every other write refuses an unknown
// field: `{"dry_run":true}` on a sandbox reset is a 400 and deletes nothing. No body, or `{}`, is
// what they take.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, type CallResult } from '../helpers/http.ts';

const ORG = 'acct-bodyless';
const base = `/organizations/${ORG}`;
let rt: TestRuntime;
let key: string;
let sandboxEventId: string;
/** Every bodyless write, with objects it can act on. */
const writes: string[] = [];

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  const workflow = await call(rt.url, 'POST', `${base}/workflows`, { token: key, json: { name: 'wait', trigger_event: 'order.placed', steps: [{ id: 'cool-off', type: 'delay', duration: 'PT1H' }] } });
  assert.equal(workflow.status, 201, workflow.text);
  const event = await call(rt.url, 'POST', `${base}/events`, { token: key, json: { type: 'order.placed', payload: {} } });
  assert.equal(event.status, 202, event.text);
  const device = await call(rt.url, 'POST', `${base}/devices`, { token: key, json: { name: 'kiosk-1' } });
  assert.equal(device.status, 201, device.text);
  const sandbox = await call(rt.url, 'POST', `${base}/events`, { token: key, json: { type: 'order.placed', payload: {}, environment: 'sandbox' } });
  assert.equal(sandbox.status, 202, sandbox.text);
  sandboxEventId = sandbox.body.event.id;
  const runs = await call(rt.url, 'GET', `${base}/runs`, { token: key });
  const runId = runs.body.runs[0]?.run_id as string;
  assert.ok(runId !== undefined, runs.text);
  writes.push(
    `${base}/sandbox/reset`,
    `${base}/runs/${runId}/cancel`,
    `${base}/runs/${runId}/resume`,
    `${base}/workflows/${workflow.body.workflow.id}/signing-secret/rotate`,
    `${base}/devices/kiosk-1/token`,
    `${base}/events/${event.body.event.id}/transport-replay`,
  );
});
after(async () => rt.close());

const post = (path: string, body?: string, contentType = 'application/json'): Promise<CallResult> =>
  call(rt.url, 'POST', path, body === undefined ? { token: key } : { token: key, body, headers: { 'content-type': contentType } });

test('a field in the body of a write that takes none is 400 unknown_field naming it, on each such write', async () => {
  for (const path of writes) {
    const answer = await post(path, '{"dry_run":true}');
    assert.deepEqual([answer.status, answer.body.error?.code, answer.body.error?.field], [400, 'unknown_field', 'dry_run'], `${path}: ${answer.text}`);
  }
});

test('a body that is not JSON, or not an object, is refused as on any write', async () => {
  for (const path of writes) {
    assert.equal((await post(path, 'x', 'text/plain')).status, 415, path);
    const malformed = await post(path, '{');
    assert.deepEqual([malformed.status, malformed.body.error?.code], [400, 'malformed_json'], path);
    const list = await post(path, '[]');
    assert.deepEqual([list.status, list.body.error?.code], [400, 'invalid_request'], path);
  }
});

test('a refused sandbox reset deletes nothing; one with {} or no body resets', async () => {
  const sandboxEvent = () => call(rt.url, 'GET', `${base}/events/${sandboxEventId}?environment=sandbox`, { token: key });
  assert.equal((await post(`${base}/sandbox/reset`, '{"dry_run":true}')).status, 400);
  assert.equal((await sandboxEvent()).status, 200, 'the refused reset kept the sandbox event');
  const reset = await post(`${base}/sandbox/reset`, '{}');
  assert.equal(reset.status, 200, reset.text);
  assert.equal(reset.body.deleted.events, 1);
  assert.equal((await sandboxEvent()).status, 404);
  assert.equal((await post(`${base}/sandbox/reset`)).status, 200, 'no body at all');
});
