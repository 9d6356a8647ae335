// What a viewer key sees of a run: its webhook attempts record the URL they posted to as evidence,
// and a token in that URL's path (Slack's and Discord's webhook URLs carry one) reads "[redacted]"
// for a viewer, as in the workflow; a developer sees the URL whole. Real runtime and receiver.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { keyWithRole } from '../actions/action-fixtures.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-run-redaction';
let rt: TestRuntime;
let receiver: Receiver;
let key: string;

before(async () => {
  rt = await startRuntime();
  receiver = await startReceiver();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => {
  await rt.close();
  await receiver.close();
});

test("a viewer reads a run's webhook evidence with the URL's token segments redacted; a developer reads the URL", async () => {
  const url = `${receiver.url}/services/T0ABC123/B0DEF456/qWeRtYuIoPaSdFgH`;
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'slack', trigger_event: 'deal.won', steps: [{ id: 'post', type: 'webhook', url }] } });
  assert.equal(created.status, 201, created.text);
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'deal.won', payload: {} } });
  assert.equal(sent.status, 202, sent.text);
  const [run] = await eventually('the completed run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs?state=completed`, { token: key })).body.runs as Array<{ run_id: string }>, (runs) => runs.length === 1);
  const path = `/organizations/${ORG}/runs/${run!.run_id}`;

  const developer = (await call(rt.url, 'GET', path, { token: key })).body.run;
  assert.equal(developer.steps[0].attempts[0].evidence.url, url);
  const viewer = await keyWithRole(rt.url, ORG, key, 'viewer');
  const seen = await call(rt.url, 'GET', path, { token: viewer.key });
  assert.equal(seen.status, 200, seen.text);
  assert.equal(seen.body.run.steps[0].attempts[0].evidence.url, `${receiver.url}/services/[redacted]/[redacted]/[redacted]`);
  assert.ok(!seen.text.includes('qWeRtYuIoPaSdFgH'), 'the token appears nowhere in the answer');
  assert.equal(seen.body.run.steps[0].attempts[0].evidence.idempotency_key, developer.steps[0].attempts[0].evidence.idempotency_key, 'the rest of the evidence stays');
});
