// A run keeps the custom action version it first ran: a version approved while the run waits in a
// delay does not reach its later step of the same action. (A resume picks the approved version
// afresh: test/e2e/custom-action-resume.test.ts.)

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { upload } from '../actions/action-fixtures.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-pinning';
const clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime({ clock, args: ['--runner', 'child'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

const post = (path: string, json?: unknown) => call(rt.url, 'POST', `/organizations/${ORG}${path}`, { token: key, ...(json === undefined ? {} : { json }) });
const runOf = async (runId: string) => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: key })).body.run;

test('a version approved while a run waits does not reach the run\'s later step of the same action', async () => {
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name: 'pin', file: await assembleWat('v1', constantWat(JSON.stringify({ v: 1 }))) });
  assert.equal(uploaded.status, 201, uploaded.text);
  const actionId: string = uploaded.body.custom_action.id;
  assert.equal((await post(`/custom-actions/${actionId}/review`, { status: 'approved', version: 1 })).status, 200);
  const steps = [{ id: 'first', type: 'custom_action', action_id: actionId }, { id: 'wait', type: 'delay', duration_ms: 60_000 }, { id: 'second', type: 'custom_action', action_id: actionId }];
  assert.equal((await post('/workflows', { name: 'pin', trigger_event: 'pin.go', steps })).status, 201);
  assert.equal((await post('/events', { type: 'pin.go', payload: {}, id: 'pin-1' })).status, 202);
  const [reaction] = await eventually('the run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/pin-1`, { token: key })).body.reactions, (r: unknown[]) => r.length === 1);
  const runId: string = (reaction as { run_id: string }).run_id;
  await eventually('the delay', () => runOf(runId), (run) => run.state === 'delaying');

  const v2 = await upload(rt.url, `/organizations/${ORG}/custom-actions/${actionId}/versions`, key, { file: await assembleWat('v2', constantWat(JSON.stringify({ v: 2 }))) });
  assert.equal(v2.status, 201, v2.text);
  assert.equal((await post(`/custom-actions/${actionId}/review`, { status: 'approved', version: 2 })).status, 200);
  clock.advance(60_000);
  await eventually('the delay timer', async () => rt.runtime.engine.timers.fireDue(), (fired) => fired === 1);
  const run = await eventually('the run to finish', () => runOf(runId), (r) => r.state === 'completed' || r.state === 'failed');
  assert.equal(run.state, 'completed');
  assert.deepEqual([run.steps[0].result, run.steps[2].result], [{ v: 1 }, { v: 1 }], 'both steps ran version 1');
  assert.equal(run.steps[2].attempts[0].evidence.version, 1);

  // A new run starts on the version approved now.
  assert.equal((await post('/events', { type: 'pin.go', payload: {}, id: 'pin-2' })).status, 202);
  const [next] = await eventually('the second run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/pin-2`, { token: key })).body.reactions, (r: unknown[]) => r.length === 1);
  const second = await eventually('its first step', () => runOf((next as { run_id: string }).run_id), (r) => r.steps[0].status === 'succeeded');
  assert.deepEqual(second.steps[0].result, { v: 2 });
});
