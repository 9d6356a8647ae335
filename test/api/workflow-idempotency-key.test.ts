// POST /workflows with an Idempotency-Key header: a retried or double-clicked create makes one
// workflow (two would start two runs per event). The retry answers the workflow as it is now with
// its signing secret; the key with another definition is 409 idempotency_key_reused; keys are per
// org; deleting the workflow frees its key.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-wf-keys';
const OTHER = 'acct-wf-keys-other';
let rt: TestRuntime;
let key: string;
let otherKey: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  otherKey = await createOrg(rt.url, ADMIN_TOKEN, OTHER);
});
after(() => rt.close());

const definition = (name: string) => ({ name, trigger_event: 'payment.succeeded', steps: [{ type: 'webhook', url: 'https://example.com/hook' }] });
const post = (json: unknown, idempotencyKey?: string, org = ORG, token = key) =>
  call(rt.url, 'POST', `/organizations/${org}/workflows`, { token, json, ...(idempotencyKey === undefined ? {} : { headers: { 'idempotency-key': idempotencyKey } }) });
const namedIds = async (name: string, org = ORG, token = key): Promise<string[]> =>
  ((await call(rt.url, 'GET', `/organizations/${org}/workflows?limit=100`, { token })).body.workflows as Array<{ id: string; name: string }>)
    .filter((workflow) => workflow.name === name)
    .map((workflow) => workflow.id);

test('a retry with the key answers the workflow it made, with its signing secret, and makes no second one; so do requests at once', async () => {
  const first = await post(definition('Retried'), 'create-retried-1');
  assert.equal(first.status, 201, first.text);
  assert.equal(first.body.idempotent_replayed, undefined);
  const retry = await post(definition('Retried'), 'create-retried-1');
  assert.equal(retry.status, 201, retry.text);
  assert.equal(retry.headers.get('idempotent-replayed'), 'true');
  assert.equal(retry.body.idempotent_replayed, true);
  assert.equal(retry.body.workflow.id, first.body.workflow.id);
  assert.equal(retry.body.signing_secret, first.body.signing_secret, 'a client whose first answer was lost still learns the secret');
  assert.deepEqual(await namedIds('Retried'), [first.body.workflow.id]);

  const atOnce = await Promise.all(Array.from({ length: 6 }, () => post(definition('At once'), 'create-at-once')));
  assert.deepEqual(atOnce.map((answer) => answer.status), [201, 201, 201, 201, 201, 201]);
  assert.equal(new Set(atOnce.map((answer) => answer.body.workflow.id)).size, 1);
  assert.equal(atOnce.filter((answer) => answer.body.idempotent_replayed === true).length, 5);
  assert.deepEqual(await namedIds('At once'), [atOnce[0]!.body.workflow.id]);

  // Without a key every create is a new workflow, as before.
  await post(definition('Unkeyed'));
  await post(definition('Unkeyed'));
  assert.equal((await namedIds('Unkeyed')).length, 2);
});

test('the key with another definition is 409 idempotency_key_reused naming the workflow; the same one in another key order is a retry', async () => {
  const first = await post(definition('Keyed once'), 'create-reused');
  assert.equal(first.status, 201, first.text);
  const other = await post(definition('Something else'), 'create-reused');
  assert.equal(other.status, 409, other.text);
  assert.equal(other.body.error.code, 'idempotency_key_reused');
  assert.equal(other.body.error.workflow_id, first.body.workflow.id);
  assert.deepEqual(await namedIds('Something else'), []);

  const { name, trigger_event, steps } = definition('Keyed once');
  const reordered = await post({ steps, trigger_event, name }, 'create-reused');
  assert.equal(reordered.status, 201, reordered.text);
  assert.equal(reordered.body.workflow.id, first.body.workflow.id);
});

test('a retry after the workflow changed answers it as it is now; after a delete the key makes a new workflow', async () => {
  const first = await post(definition('Changed later'), 'create-changed');
  const id = first.body.workflow.id as string;
  const put = await call(rt.url, 'PUT', `/organizations/${ORG}/workflows/${id}`, { token: key, json: { ...definition('Changed later'), status: 'disabled' } });
  assert.equal(put.status, 200, put.text);
  const retry = await post(definition('Changed later'), 'create-changed');
  assert.equal(retry.status, 201, retry.text);
  assert.equal(retry.body.workflow.id, id);
  assert.equal(retry.body.workflow.version, 2);
  assert.equal(retry.body.workflow.status, 'disabled');

  assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/workflows/${id}`, { token: key })).status, 204);
  const again = await post(definition('Changed later'), 'create-changed');
  assert.equal(again.status, 201, again.text);
  assert.notEqual(again.body.workflow.id, id);
  assert.equal(again.body.idempotent_replayed, undefined);
});

test('a definition holding -0 (JSON keeps the sign) is the same one sent again: a keyed retry replays, the same PATCH makes no version', async () => {
  // Sent as text: JSON.stringify would write -0 as 0.
  const body = '{"name":"Signed zero","trigger_event":"payment.succeeded","steps":[{"id":"send","type":"webhook","url":"https://example.com/hook","retry":{"max_retries":-0}}]}';
  const send = () => call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, body, headers: { 'content-type': 'application/json', 'idempotency-key': 'create-signed-zero' } });
  const first = await send();
  assert.equal(first.status, 201, first.text);
  const retry = await send();
  assert.equal(retry.status, 201, retry.text);
  assert.equal(retry.headers.get('idempotent-replayed'), 'true');
  const patch = '{"steps":[{"id":"send","type":"webhook","url":"https://example.com/hook","retry":{"max_retries":-0}}]}';
  const patched = await call(rt.url, 'PATCH', `/organizations/${ORG}/workflows/${first.body.workflow.id}`, { token: key, body: patch, headers: { 'content-type': 'application/json' } });
  assert.equal(patched.status, 200, patched.text);
  assert.equal(patched.body.workflow.version, 1, 'nothing changed: no new version');
});

test('keys are per org; a key the API refuses is 400 invalid_idempotency_key and creates nothing', async () => {
  const mine = await post(definition('Shared key'), 'create-shared');
  const theirs = await post(definition('Shared key'), 'create-shared', OTHER, otherKey);
  assert.equal(theirs.status, 201, theirs.text);
  assert.notEqual(theirs.body.workflow.id, mine.body.workflow.id);
  assert.equal(theirs.body.idempotent_replayed, undefined);
  assert.deepEqual(await namedIds('Shared key', OTHER, otherKey), [theirs.body.workflow.id]);

  for (const header of ['has space', `k${'x'.repeat(255)}`]) {
    const refused = await post(definition('Bad key'), header);
    assert.equal(refused.status, 400, header);
    assert.equal(refused.body.error.code, 'invalid_idempotency_key');
    assert.equal(refused.body.error.field, 'Idempotency-Key');
  }
  assert.deepEqual(await namedIds('Bad key'), []);
});
