// What a viewer key sees of a run: its webhook attempts record the URL they posted to as evidence,
// and a token in that URL's path (Slack's and Discord's webhook URLs carry one) reads "[redacted]"
// for a viewer, as in the workflow; so do the step's credentials wherever the receiver's answers
// quote them. A developer sees everything. Real runtime and receiver.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { keyWithRole } from '../actions/action-fixtures.ts';
import { call, createOrg, type CallResult } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-run-redaction';
let rt: TestRuntime;
let receiver: Receiver;
let key: string;

before(async () => {
  rt = await startRuntime();
  // The first answer is an error page quoting the request, the second echoes it: as some receivers do.
  receiver = await startReceiver([
    { status: 500, body: 'upstream failed for /services/T0ABC123/B0DEF456/qWeRtYuIoPaSdFgH with authorization: Bearer hdr-SeCrEt-42' },
    { status: 200, body: '{"echo":{"authorization":"Bearer hdr-SeCrEt-42","x-team":"ops"}}' },
  ]);
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => {
  await rt.close();
  await receiver.close();
});

/** Runs a one-step workflow on a new event until the run is `state`; answers the run as its developer and as a viewer read it. */
async function runOnce(name: string, step: Record<string, unknown>, state: 'completed' | 'failed'): Promise<{ developer: CallResult; viewer: CallResult }> {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: `deal.${name}`, steps: [step] } });
  assert.equal(created.status, 201, created.text);
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: `deal.${name}`, payload: {} } });
  assert.equal(sent.status, 202, sent.text);
  const runs = await eventually(`the ${state} run`, async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs?state=${state}&workflow_id=${created.body.workflow.id}`, { token: key })).body.runs as Array<{ run_id: string }>, (list) => list.length === 1);
  const path = `/organizations/${ORG}/runs/${runs[0]!.run_id}`;
  const viewer = await keyWithRole(rt.url, ORG, key, 'viewer');
  const seen = await call(rt.url, 'GET', path, { token: viewer.key });
  assert.equal(seen.status, 200, seen.text);
  return { developer: await call(rt.url, 'GET', path, { token: key }), viewer: seen };
}

test("a viewer reads a run's webhook evidence with the URL's token segments redacted; a developer reads the URL", async () => {
  const url = `${receiver.url}/services/T0ABC123/B0DEF456/qWeRtYuIoPaSdFgH`;
  const step = { id: 'post', type: 'webhook', url, headers: { authorization: 'Bearer hdr-SeCrEt-42', 'x-team': 'ops' }, retry: { max_retries: 1, initial_ms: 50, max_ms: 50 } };
  const { developer: { body: { run: developer } }, viewer: seen } = await runOnce('won', step, 'completed');
  assert.equal(developer.steps[0].attempts.length, 2, 'a failed attempt, then the one that completed');
  assert.equal(developer.steps[0].attempts[0].evidence.url, url);
  assert.match(developer.steps[0].attempts[0].evidence.body, /Bearer hdr-SeCrEt-42/);
  const [failed, completed] = seen.body.run.steps[0].attempts;
  for (const attempt of [failed, completed]) assert.equal(attempt.evidence.url, `${receiver.url}/services/[redacted]/[redacted]/[redacted]`);
  assert.equal(failed.evidence.body, 'upstream failed for /services/[redacted]/[redacted]/[redacted] with authorization: [redacted]');
  assert.deepEqual(JSON.parse(seen.body.run.steps[0].result.body), { echo: { authorization: '[redacted]', 'x-team': 'ops' } }, 'a header value is redacted whole; short values (ops) are not searched for');
  for (const secret of ['qWeRtYuIoPaSdFgH', 'T0ABC123', 'hdr-SeCrEt-42']) assert.ok(!seen.text.includes(secret), `${secret} appears nowhere in the answer`);
  assert.equal(failed.evidence.idempotency_key, developer.steps[0].attempts[0].evidence.idempotency_key, 'the rest of the evidence stays');
  assert.equal(failed.evidence.status, 500);
});

test('a step URL whose path is not valid percent-encoding still reads redacted for a viewer (not a 500)', async () => {
  receiver.script([{ status: 200, body: '{"ok":true}' }]);
  const { viewer } = await runOnce('odd', { id: 'post', type: 'webhook', url: `${receiver.url}/hooks/%zzTOKEN123/y` }, 'completed');
  assert.equal(viewer.body.run.steps[0].attempts[0].evidence.url, `${receiver.url}/hooks/[redacted]/y`);
});

test('credentials are scrubbed in the forms a receiver quotes them: a query value as sent (percent-encoded) and a header token JSON-escaped', async () => {
  receiver.script([{ status: 400, body: '{"error":"Cannot POST /in?sig=Ab%2Bcd%2Fef%3D%3D","seen":"tok\\/en+123=="}' }]);
  const step = { id: 'post', type: 'webhook', url: `${receiver.url}/in?sig=Ab%2Bcd%2Fef%3D%3D`, headers: { 'x-token': 'tok/en+123==' } };
  const { viewer } = await runOnce('sas', step, 'failed');
  assert.equal(viewer.body.run.steps[0].attempts[0].evidence.body, '{"error":"Cannot POST /in?sig=[redacted]","seen":"[redacted]"}');
});

test('a receiver answer cut at 4 KiB inside a quoted credential, and a decoded Basic password, read redacted for a viewer', async () => {
  const bearer = 'Bearer PADSECRETtoken0123456789abcdef';
  // 4,096 bytes are kept: the cut falls one character before the credential's end.
  const cut = `${'x'.repeat(4096 - 'auth='.length - (bearer.length - 1))}auth=${bearer}`;
  receiver.script([{ status: 200, body: cut }]);
  const padded = await runOnce('cut', { id: 'post', type: 'webhook', url: `${receiver.url}/in`, headers: { authorization: bearer } }, 'completed');
  assert.equal(padded.developer.body.run.steps[0].attempts[0].evidence.body_truncated, true);
  assert.ok(padded.developer.body.run.steps[0].attempts[0].evidence.body.endsWith('auth=Bearer PADSECRETtoken0123456789abcde'));
  assert.ok(padded.viewer.body.run.steps[0].attempts[0].evidence.body.endsWith('auth=[redacted]'), 'the cut credential is masked');
  assert.ok(padded.viewer.body.run.steps[0].result.body.endsWith('auth=[redacted]'), 'in the step result too');
  assert.ok(!padded.viewer.text.includes('PADSECRET'));

  // An answer kept whole is not cut: one that merely ends like a credential's start stays as it is.
  receiver.script([{ status: 200, body: 'auth scheme: Bearer PADSEC' }]);
  const whole = await runOnce('whole', { id: 'post', type: 'webhook', url: `${receiver.url}/in`, headers: { authorization: bearer } }, 'completed');
  assert.equal(whole.viewer.body.run.steps[0].attempts[0].evidence.body, 'auth scheme: Bearer PADSEC');

  receiver.script([{ status: 401, body: 'invalid credentials: user=user password=BasicPasswordSecret99' }]);
  const basic = `Basic ${Buffer.from('user:BasicPasswordSecret99').toString('base64')}`;
  const { viewer } = await runOnce('basic', { id: 'post', type: 'webhook', url: `${receiver.url}/in`, headers: { authorization: basic } }, 'failed');
  assert.equal(viewer.body.run.steps[0].attempts[0].evidence.body, 'invalid credentials: user=user password=[redacted]');
});

test('a credential inside a header\'s name=value, quotes or list, or in a path segment\'s parameter, reads redacted for a viewer when an answer quotes it alone', async () => {
  receiver.script([{ status: 401, body: 'Invalid token S3cretValue99; unknown session AbCdEf123456; bad key q1w2e3r4t5y6; bad zzTopSecret1; user bob' }]);
  const step = {
    id: 'post',
    type: 'webhook',
    url: `${receiver.url}/h;token=zzTopSecret1`,
    headers: { authorization: 'Token token="S3cretValue99"', cookie: 'session=AbCdEf123456', 'x-auth': 'key=q1w2e3r4t5y6,user=bob' },
  };
  const { viewer } = await runOnce('quoted', step, 'failed');
  assert.equal(viewer.body.run.steps[0].attempts[0].evidence.body, 'Invalid token [redacted]; unknown session [redacted]; bad key [redacted]; bad [redacted]; user bob');
});

test('a credential with a backslash reads redacted when an answer quotes it escaped several times over (an answer quoting a request that quoted an earlier answer)', async () => {
  const password = 'Pa\\ssw0rdXYZ42';
  const escape = (text: string): string => JSON.stringify(text).slice(1, -1);
  // Escaped once by the first receiver's JSON answer, once more in the next step's `results`, once
  // more by that step's receiver echoing its request: 8 backslashes where the header had one.
  receiver.script([{ status: 200, body: `thrice ${escape(escape(escape(password)))} twice ${escape(escape(password))} five ${escape(escape(escape(escape(escape(password)))))}` }]);
  const { developer, viewer } = await runOnce('nested', { id: 'post', type: 'webhook', url: `${receiver.url}/in`, headers: { 'x-password': password } }, 'completed');
  assert.match(developer.body.run.steps[0].attempts[0].evidence.body, /^thrice Pa\\{8}ssw0rdXYZ42 /);
  assert.equal(viewer.body.run.steps[0].attempts[0].evidence.body, 'thrice [redacted] twice [redacted] five [redacted]');
});

test('a credential with a "/" reads redacted when a receiver that escapes "/" (PHP\'s JSON) quoted it and later steps quoted that again', async () => {
  const token = 's3cr3t/p4ssw0rd';
  const json = (text: string): string => JSON.stringify(text).slice(1, -1);
  const php = (text: string): string => json(text).replaceAll('/', '\\/');
  receiver.script([{ status: 200, body: `php ${php(token)} then ${json(php(token))} and ${json(json(php(token)))} all ${php(php(php(token)))}` }]);
  const { viewer } = await runOnce('php', { id: 'post', type: 'webhook', url: `${receiver.url}/in`, headers: { 'x-api-key': token } }, 'completed');
  assert.equal(viewer.body.run.steps[0].attempts[0].evidence.body, 'php [redacted] then [redacted] and [redacted] all [redacted]');
});
