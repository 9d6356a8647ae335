// An org moved to a plan without the sandbox can no longer reach its sandbox records (402), but
// can delete them: they still count against its caps (sources, schedules, devices, workflows), and
// a 409 saying "delete one first" must be something it can do. Through a real runtime.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-downgraded';
const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
});
after(() => rt.close());

test('sandbox sources, schedules, devices and workflows of a downgraded org: 402 to read or change, deletable', async () => {
  const base = `/organizations/${ORG}`;
  const made = async (path: string, json: unknown): Promise<string> => {
    const answer = await call(rt.url, 'POST', `${base}${path}`, { token: key, json });
    assert.equal(answer.status, 201, answer.text);
    return answer.body.workflow?.id ?? answer.body.source?.name ?? answer.body.schedule?.name ?? answer.body.device?.name;
  };
  const records = [
    `/sources/${await made('/sources', { name: 'sb-source', secrets: [SECRET], environment: 'sandbox' })}`,
    `/schedules/${await made('/schedules', { name: 'sb-schedule', cron: '0 * * * *', event_type: 'report.hourly', environment: 'sandbox' })}`,
    `/devices/${await made('/devices', { name: 'sb-device', environment: 'sandbox' })}`,
    `/workflows/${await made('/workflows', { name: 'sb-flow', trigger_event: 'a.b', environment: 'sandbox', steps: [{ type: 'webhook', url: 'https://example.com/hook' }] })}`,
  ];
  const downgraded = await call(rt.url, 'PATCH', base, { token: ADMIN_TOKEN, json: { plan: 'starter' } });
  assert.equal(downgraded.status, 200, downgraded.text);
  for (const path of records) {
    const read = await call(rt.url, 'GET', `${base}${path}?environment=sandbox`, { token: key });
    assert.deepEqual([read.status, read.body.error?.code], [402, 'sandbox_disabled'], path);
    const deleted = await call(rt.url, 'DELETE', `${base}${path}?environment=sandbox`, { token: key });
    assert.ok(deleted.status === 204 || deleted.status === 200, `${path}: ${deleted.status} ${deleted.text}`);
    const gone = await call(rt.url, 'DELETE', `${base}${path}?environment=sandbox`, { token: key });
    assert.equal(gone.status, 404, `${path} is gone`);
  }
});

test('a webhook to a sandbox source of a downgraded org: only a signed delivery hears 402, an unsigned one 401 (the plan is not told to anyone)', async () => {
  const org = 'acct-downgraded-hook';
  const admin = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const source = await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: admin, json: { name: 'sb-in', secrets: [SECRET], environment: 'sandbox' } });
  assert.equal(source.status, 201, source.text);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
  const body = JSON.stringify({ type: 'a.b' });
  const now = Math.floor(Date.now() / 1000);
  const unsigned = await call(rt.url, 'POST', `/hooks/${org}/sb-in`, { body, headers: { 'content-type': 'application/json' } });
  assert.deepEqual([unsigned.status, unsigned.body.error?.code], [401, 'missing_signature'], unsigned.text);
  const forged = await call(rt.url, 'POST', `/hooks/${org}/sb-in`, { body, headers: signStandard(`whsec_${Buffer.alloc(32, 9).toString('base64')}`, 'msg-forged', now, body) });
  assert.deepEqual([forged.status, forged.body.error?.code], [401, 'invalid_signature'], forged.text);
  assert.doesNotMatch(forged.text, /sandbox|plan/);
  const signed = await call(rt.url, 'POST', `/hooks/${org}/sb-in`, { body, headers: signStandard(SECRET, 'msg-signed', now, body) });
  assert.deepEqual([signed.status, signed.body.error?.code], [402, 'sandbox_disabled'], signed.text);
});
