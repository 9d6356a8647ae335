// Reads and writes by id are scoped to one environment (`?environment=`, default production), as
// the list endpoints are: a sandbox workflow or run is a 404 from a production-scoped request.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';

const ORG = 'acct-scope';
const base = `/organizations/${ORG}`;
let rt: TestRuntime;
let key: string;
let workflowId: string;
let runId: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  // A long delay keeps the run unfinished, so cancel has something to act on.
  const workflow = { name: 'sb', trigger_event: 'x.y', environment: 'sandbox', steps: [{ type: 'delay', duration_ms: 600_000 }] };
  const created = await call(rt.url, 'POST', `${base}/workflows`, { token: key, json: workflow });
  assert.equal(created.status, 201, created.text);
  workflowId = created.body.workflow.id;
  assert.equal((await call(rt.url, 'POST', `${base}/events`, { token: key, json: { type: 'x.y', payload: {}, environment: 'sandbox' } })).status, 202);
  const runs = await call(rt.url, 'GET', `${base}/runs?environment=sandbox`, { token: key });
  assert.equal(runs.body.runs.length, 1, runs.text);
  runId = runs.body.runs[0].run_id;
});
after(async () => rt.close());

const get = (path: string) => call(rt.url, 'GET', `${base}${path}`, { token: key });
const post = (path: string, json?: unknown) => call(rt.url, 'POST', `${base}${path}`, { token: key, ...(json === undefined ? {} : { json }) });

test('a sandbox workflow read by id from production answers 404', async () => {
  for (const query of ['?environment=production', '']) {
    const read = await get(`/workflows/${workflowId}${query}`);
    assert.equal(read.status, 404, `GET workflow${query}`);
    assert.equal(read.body.error.field, 'workflow_id');
    assert.equal((await get(`/workflows/${workflowId}/versions${query}`)).status, 404, `versions${query}`);
    assert.equal((await get(`/workflows/${workflowId}/versions/1${query}`)).status, 404, `version 1${query}`);
  }
  const read = await get(`/workflows/${workflowId}?environment=sandbox`);
  assert.equal(read.status, 200);
  assert.equal(read.body.workflow.environment, 'sandbox');
  assert.equal((await get(`/workflows/${workflowId}/versions?environment=sandbox`)).status, 200);
  assert.equal((await get(`/workflows/${workflowId}?environment=staging`)).status, 400);
});

test('a sandbox workflow cannot be changed through a production-scoped request', async () => {
  const patch = await call(rt.url, 'PATCH', `${base}/workflows/${workflowId}`, { token: key, json: { name: 'renamed' } });
  assert.equal(patch.status, 404);
  assert.equal((await post(`/workflows/${workflowId}/toggle`, { action: 'disable' })).status, 404);
  assert.equal((await post(`/workflows/${workflowId}/signing-secret/rotate`)).status, 404);
  assert.equal((await call(rt.url, 'DELETE', `${base}/workflows/${workflowId}`, { token: key })).status, 404);
  const current = await get(`/workflows/${workflowId}?environment=sandbox`);
  assert.equal(current.body.workflow.name, 'sb');
  assert.equal(current.body.workflow.status, 'enabled');
  const renamed = await call(rt.url, 'PATCH', `${base}/workflows/${workflowId}?environment=sandbox`, { token: key, json: { name: 'renamed' } });
  assert.equal(renamed.status, 200, renamed.text);
  assert.equal(renamed.body.workflow.name, 'renamed');
});

test('a sandbox run read by id from production answers 404', async () => {
  for (const query of ['?environment=production', '']) {
    const read = await get(`/runs/${runId}${query}`);
    assert.equal(read.status, 404, `GET run${query}`);
    assert.equal(read.body.error.field, 'run_id');
  }
  const read = await get(`/runs/${runId}?environment=sandbox`);
  assert.equal(read.status, 200);
  assert.equal(read.body.run.state, 'delaying');
});

test('resume and cancel do not cross environments', async () => {
  // Resume of a run that is not failed is a 409 when found: the 404 shows it is not found at all.
  assert.equal((await post(`/runs/${runId}/resume`)).status, 404);
  assert.equal((await post(`/runs/${runId}/resume?environment=sandbox`)).status, 409);
  assert.equal((await post(`/runs/${runId}/cancel?environment=production`)).status, 404);
  assert.equal((await get(`/runs/${runId}?environment=sandbox`)).body.run.state, 'delaying', 'the refused cancel changed nothing');
  const cancelled = await post(`/runs/${runId}/cancel?environment=sandbox`);
  assert.equal(cancelled.status, 200, cancelled.text);
  assert.equal(cancelled.body.run.state, 'cancelled');
});

test('a create takes its environment in the body: `?environment=` on it is a 400 and creates nothing in production', async () => {
  const countProduction = async () => (await get('/events?limit=500')).body.events.length as number;
  const before = await countProduction();
  for (const [path, json] of [
    ['/events', { type: 'x.y', payload: {} }],
    ['/workflows', { name: 'p', trigger_event: 'x.y', steps: [{ type: 'delay', duration_ms: 1000 }] }],
    ['/sources', { name: 'pay', secrets: [`whsec_${Buffer.alloc(24, 1).toString('base64')}`] }],
  ] as const) {
    const refused = await post(`${path}?environment=sandbox`, json);
    assert.equal(refused.status, 400, `${path}: ${refused.text}`);
    assert.deepEqual([refused.body.error.code, refused.body.error.field], ['unknown_query_parameter', 'environment']);
  }
  assert.equal(await countProduction(), before, 'no production event');
  assert.equal((await get('/workflows')).body.workflows.length, 0, 'no production workflow');
  assert.equal((await get('/sources')).body.sources.length, 0, 'no production source');
});

test('a misspelled parameter on a read by id is 400 naming it, not a 404 for what exists', async () => {
  const run = (await get(`/runs/${runId}?environment=sandbox`)).body.run;
  const paths = [
    `/workflows/${workflowId}`,
    `/workflows/${workflowId}/versions`,
    `/workflows/${workflowId}/versions/1`,
    `/runs/${runId}`,
    `/events/${run.event_id}`,
    '/sources/pay',
    '/devices/kiosk',
    '/schedules/nightly',
    '/projections/inv/item/sku-1',
  ];
  for (const path of paths) {
    const typo = await get(`${path}?enviroment=sandbox`);
    assert.deepEqual([typo.status, typo.body.error?.code, typo.body.error?.field], [400, 'unknown_query_parameter', 'enviroment'], `${path}: ${typo.text}`);
  }
  for (const path of ['', '/custom-actions/act_nope', '/custom-actions/act_nope/secrets']) {
    const typo = await get(`${path}?verbose=1`);
    assert.deepEqual([typo.status, typo.body.error?.code], [400, 'unknown_query_parameter'], `${path}: ${typo.text}`);
  }
  assert.equal((await get(`/events/${run.event_id}?environment=sandbox`)).status, 200, 'the parameter spelled right');
  assert.equal((await get(`/workflows/${workflowId}/versions?environment=sandbox&limit=1`)).status, 200);
});
