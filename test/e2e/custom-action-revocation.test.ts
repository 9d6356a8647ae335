// Revoking a custom action version, through the real runtime and the real hook-runner child: a run
// pinned to the revoked version fails at its next step of that action instead of moving to another
// version; its resume takes the version approved now; revoking the approved version leaves the
// action with none. Only admins revoke, only approved or superseded versions, naming the version.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { keyWithRole, upload } from '../actions/action-fixtures.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-revocation';
const clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime({ clock, args: ['--runner', 'child'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

const post = (path: string, json?: unknown, token = key) => call(rt.url, 'POST', `/organizations/${ORG}${path}`, { token, ...(json === undefined ? {} : { json }) });
const runOf = async (runId: string) => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: key })).body.run;
const settled = (runId: string) => eventually(`run ${runId} to settle`, () => runOf(runId), (run) => run.state === 'completed' || run.state === 'failed');

async function runFor(eventId: string): Promise<string> {
  assert.equal((await post('/events', { type: 'revoke.go', payload: {}, id: eventId })).status, 202);
  const [reaction] = await eventually('the run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key })).body.reactions, (r: unknown[]) => r.length === 1);
  return (reaction as { run_id: string }).run_id;
}

test('a run pinned to a revoked version fails instead of moving on; its resume takes the approved version; revoking that one leaves none', async () => {
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name: 'revocable', file: await assembleWat('v1', constantWat(JSON.stringify({ v: 1 }))) });
  assert.equal(uploaded.status, 201, uploaded.text);
  const actionId: string = uploaded.body.custom_action.id;
  const review = (json: unknown, token = key) => post(`/custom-actions/${actionId}/review`, json, token);
  assert.equal((await review({ status: 'approved', version: 1 })).status, 200);
  const steps = [{ id: 'first', type: 'custom_action', action_id: actionId }, { id: 'wait', type: 'delay', duration_ms: 60_000 }, { id: 'second', type: 'custom_action', action_id: actionId }];
  assert.equal((await post('/workflows', { name: 'revocable', trigger_event: 'revoke.go', steps })).status, 201);
  const runId = await runFor('revoke-1');
  await eventually('the delay', () => runOf(runId), (run) => run.state === 'delaying');

  const v2 = await upload(rt.url, `/organizations/${ORG}/custom-actions/${actionId}/versions`, key, { file: await assembleWat('v2', constantWat(JSON.stringify({ v: 2 }))) });
  assert.equal(v2.status, 201, v2.text);
  const developer = await keyWithRole(rt.url, ORG, key, 'developer');
  assert.equal((await review({ status: 'revoked', version: 2 }, developer.key)).status, 403, 'only admins review');
  const pending = await review({ status: 'revoked', version: 2 });
  assert.equal(pending.status, 409, pending.text);
  assert.equal(pending.body.error.code, 'version_not_revocable');
  assert.equal((await review({ status: 'revoked' })).body.error.code, 'version_required');
  assert.equal((await review({ status: 'approved', version: 2 })).status, 200);
  const revoked = await review({ status: 'revoked', version: 1, reason: 'leaks the API key into its output' });
  assert.equal(revoked.status, 200, revoked.text);
  assert.equal(revoked.body.reviewed_version.status, 'revoked');
  assert.equal(revoked.body.custom_action.approved_version, 2, 'revoking a superseded version leaves the approved one');

  clock.advance(60_000);
  await eventually('the delay timer', async () => rt.runtime.engine.timers.fireDue(), (fired) => fired === 1);
  const failed = await settled(runId);
  assert.equal(failed.state, 'failed');
  assert.equal(failed.steps[2].attempts[0].error.code, 'custom_action_revoked', 'the pinned run does not move to version 2');

  assert.equal((await post(`/runs/${runId}/resume`)).status, 202);
  const resumed = await eventually('the resumed run', () => runOf(runId), (run) => run.state === 'completed' || run.steps[2].attempts.length > 1 && run.state === 'failed');
  assert.equal(resumed.state, 'completed');
  assert.deepEqual(resumed.steps[2].result, { v: 2 }, 'the resume took the approved version');

  // A permission edit made before the revocation waits for review with version 2's module.
  const edited = await call(rt.url, 'PATCH', `/organizations/${ORG}/custom-actions/${actionId}`, { token: key, json: { permissions: ['read_secret:TOKEN'] } });
  assert.equal(edited.status, 200, edited.text);
  assert.equal(edited.body.new_version.version, 3);
  const none = await review({ status: 'revoked', version: 2, reason: 'unsafe' });
  assert.equal(none.status, 200, none.text);
  assert.equal(none.body.custom_action.approved_version, null);
  const [, second, third] = none.body.custom_action.versions as Array<{ status: string; reviewer: string; reviewed_at: string; revoked?: { by: string; reason: string } }>;
  assert.equal(second!.status, 'revoked');
  assert.ok(second!.reviewer && second!.reviewed_at, 'the approval stays on record');
  assert.equal(second!.revoked?.reason, 'unsafe');
  assert.equal(third!.status, 'rejected', 'the pending edit of the revoked module is rejected with it');
  assert.equal((await review({ status: 'approved', version: 3 })).body.error.code, 'version_not_pending');
  const next = await settled(await runFor('revoke-2'));
  assert.equal(next.state, 'failed');
  assert.equal(next.steps[0].attempts[0].error.code, 'custom_action_not_approved');
  // Nothing is left to approve: the advice is the one that can be followed.
  assert.match(next.steps[0].attempts[0].error.message, /latest is rejected\); upload a new version \(POST …\/custom-actions\/:id\/versions\) and have an admin approve it\.$/);
  const edit = await call(rt.url, 'PATCH', `/organizations/${ORG}/custom-actions/${actionId}`, { token: key, json: { permissions: ['read_secret:API_KEY'] } });
  assert.equal(edit.status, 409, 'a revoked module does not come back as a permission change');
  assert.equal(edit.body.error.code, 'module_rejected');
});

test('revoking a version revokes its module: a later version that only changed permissions goes with it', async () => {
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name: 'module-wide', file: await assembleWat('m', constantWat(JSON.stringify({ m: 1 }))) });
  assert.equal(uploaded.status, 201, uploaded.text);
  const actionId: string = uploaded.body.custom_action.id;
  const review = (json: unknown) => post(`/custom-actions/${actionId}/review`, json);
  assert.equal((await review({ status: 'approved', version: 1 })).status, 200);
  const edited = await call(rt.url, 'PATCH', `/organizations/${ORG}/custom-actions/${actionId}`, { token: key, json: { permissions: ['read_secret:TOKEN'] } });
  assert.equal(edited.status, 200, edited.text);
  assert.equal((await review({ status: 'approved', version: 2 })).status, 200);
  const revoked = await review({ status: 'revoked', version: 1 });
  assert.equal(revoked.status, 200, revoked.text);
  assert.deepEqual(revoked.body.custom_action.versions.map((v: { status: string }) => v.status), ['revoked', 'revoked']);
  assert.equal(revoked.body.custom_action.approved_version, null, 'the same module under version 2 is out of use too');
});
