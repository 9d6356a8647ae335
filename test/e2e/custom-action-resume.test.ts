// Resuming a run whose custom_action step trapped, through the real runtime and the real hook-runner
// child: the trapped step runs again on resume, and an approved fixed version completes the run.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startActionRuntime, upload, type ActionModules } from '../actions/action-fixtures.ts';
import { call } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import type { TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-resume';
let rt: TestRuntime;
let key: string;
let modules: ActionModules;

before(async () => {
  ({ rt, key, modules } = await startActionRuntime(ORG));
});
after(() => rt.close());

const post = (path: string, json?: unknown) => call(rt.url, 'POST', `/organizations/${ORG}${path}`, { token: key, ...(json === undefined ? {} : { json }) });

interface Attempt { fence: number; outcome: string; error?: { code: string; message: string }; evidence?: { version: number; replayed: boolean } }

/** The run once it has settled with `attempts` attempts of its only step. */
async function settled(runId: string, attempts: number): Promise<{ state: string; steps: Array<{ result: unknown; attempts: Attempt[] }> }> {
  return eventually(
    `run ${runId} settled after ${attempts} attempts`,
    async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: key })).body.run,
    (run) => ['failed', 'completed'].includes(run.state) && run.steps[0].attempts.length === attempts,
  );
}

test('a run failed by a trapping action completes when resumed after a fixed version is approved', async () => {
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name: 'scorer', file: modules.trap });
  assert.equal(uploaded.status, 201, uploaded.text);
  const actionId: string = uploaded.body.custom_action.id;
  assert.equal((await post(`/custom-actions/${actionId}/review`, { status: 'approved', version: 1 })).status, 200);
  const workflow = await post('/workflows', { name: 'score', trigger_event: 'orders.created', steps: [{ id: 'score', type: 'custom_action', action_id: actionId }] });
  assert.equal(workflow.status, 201, workflow.text);
  assert.equal((await post('/events', { type: 'orders.created', payload: { order_id: 'o1' }, id: 'order-1' })).status, 202);
  const reactions = await eventually('the failed run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/order-1`, { token: key })).body.reactions, (r) => r.length === 1 && r[0].state === 'failed');
  const runId: string = reactions[0].run_id;
  const first = await settled(runId, 1);
  assert.equal(first.steps[0]!.attempts[0]!.error?.code, 'action_trap_unreachable');
  assert.match(first.steps[0]!.attempts[0]!.error?.message ?? '', /\(an abort or panic in the action's code; the kits trap so too when the output passes 256 KB or the guest's memory runs out\)$/, 'the causes a kit user looks for');

  // A plain resume runs the same version again: the trap was not stored as the step's result.
  assert.equal((await post(`/runs/${runId}/resume`)).status, 202);
  const plain = await settled(runId, 2);
  assert.equal(plain.state, 'failed');
  assert.equal(plain.steps[0]!.attempts[1]!.error?.code, 'action_trap_unreachable');
  assert.deepEqual(plain.steps[0]!.attempts[1]!.evidence?.replayed, false);

  // A fixed version 2 is uploaded and approved; the resumed run executes it under the same step key.
  const v2 = await upload(rt.url, `/organizations/${ORG}/custom-actions/${actionId}/versions`, key, { file: modules.echo });
  assert.equal(v2.status, 201, v2.text);
  assert.equal((await post(`/custom-actions/${actionId}/review`, { status: 'approved', version: 2 })).status, 200);
  assert.equal((await post(`/runs/${runId}/resume`)).status, 202);
  const fixed = await settled(runId, 3);
  const attempt = fixed.steps[0]!.attempts[2]!;
  assert.equal(fixed.state, 'completed', JSON.stringify(attempt));
  assert.equal(attempt.outcome, 'succeeded');
  assert.deepEqual({ version: attempt.evidence?.version, replayed: attempt.evidence?.replayed }, { version: 2, replayed: false });
  assert.deepEqual((fixed.steps[0]!.result as { payload: unknown }).payload, { order_id: 'o1' });
});
