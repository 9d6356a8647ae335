// A runtime started without a hook-runner (`--runner off`): custom action metadata stays readable and
// reviewable, while uploads, secrets and simulate answer 503 hook_runner_unavailable with what to do;
// custom_action steps fail retryably, back off on the injected clock, and once out of retries wait to be resumed.

import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { CustomActionStore } from '../../runtime/actions/custom-action-store.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { assertRetryDue } from '../helpers/retry-due.ts';
import { upload } from './action-fixtures.ts';

const ORG = 'acct-no-runner';
const base = `/organizations/${ORG}/custom-actions`;
const clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime({ clock, args: ['--runner', 'off'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => rt.close());

const expect503 = (answer: { status: number; body: any }, what: string): void => {
  assert.equal(answer.status, 503, what);
  assert.equal(answer.body.error.code, 'hook_runner_unavailable', what);
  assert.match(answer.body.error.message, /sluice dev|--runner/, what);
};

it('uploads, secrets and simulate answer 503; reads and reviews still work', async () => {
  expect503(await upload(rt.url, base, key, { name: 'x', file: new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]) }), 'upload');

  // An action written while a runner was configured (straight into this runtime's ledger).
  const store = new CustomActionStore(rt.runtime.ledger);
  const action = await store.create(ORG, { name: 'earlier', description: '', module: { digest: 'd'.repeat(64), size: 8, bytes: new Uint8Array(8) }, permissions: [] }, Date.now());
  const one = `${base}/${action.id}`;
  expect503(await upload(rt.url, `${one}/versions`, key, { file: new Uint8Array([1]) }), 'new version');
  expect503(await call(rt.url, 'POST', `${one}/secrets`, { token: key, json: { key: 'A', value: 'v' } }), 'put secret');
  expect503(await call(rt.url, 'GET', `${one}/secrets`, { token: key }), 'list secrets');
  expect503(await call(rt.url, 'DELETE', `${one}/secrets/A`, { token: key }), 'delete secret');
  expect503(await call(rt.url, 'POST', `${one}/simulate`, { token: key, json: { payload: {} } }), 'simulate');

  assert.equal((await call(rt.url, 'GET', one, { token: key })).status, 200);
  const approved = await call(rt.url, 'POST', `${one}/review`, { token: key, json: { status: 'approved', version: 1 } });
  assert.equal(approved.status, 200, approved.text);
  assert.equal(store.resolveForRun(ORG, action.id).kind, 'approved');
});

interface RunView {
  state: string;
  retry_at: string | null;
  error: { code: string; reason: string; step_id: string } | null;
  steps: Array<{ attempts: Array<{ outcome: string; error: { code: string; retryable: boolean } | null; evidence: unknown; started_at: string | null }> }>;
}
const runOf = async (runId: string): Promise<RunView> => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: key })).body.run;
/** The run once its only step has made `attempts` attempts and the last one is over; it must then sit in `state`. */
async function runAfter(runId: string, attempts: number, state: string): Promise<RunView> {
  const run = await eventually(`run ${runId} after ${attempts} attempts`, () => runOf(runId), (r) => r.steps[0]!.attempts.length === attempts && !['queued', 'running'].includes(r.state));
  assert.equal(run.state, state, `after ${attempts} attempts: ${JSON.stringify(run.error ?? run.steps[0]!.attempts.at(-1)?.error)}`);
  return run;
}
/** Waits until the engine has armed the run's retry timer for `at`, then moves the clock there and fires it. */
async function retryAt(runId: string, at: number): Promise<void> {
  await eventually(`retry timer of ${runId}`, () => rt.runtime.engine.timerDueAt(ORG, runId), (due) => due === at);
  assert.equal(rt.runtime.engine.timers.fireDue(), 0, 'nothing fires before its time');
  clock.set(at);
  assert.equal(rt.runtime.engine.timers.fireDue(), 1);
}

it('a custom_action step backs off and retries as hook_runner_unavailable; out of retries the run fails and waits to be resumed', async () => {
  const action = await new CustomActionStore(rt.runtime.ledger).create(ORG, { name: 'offline', description: '', module: { digest: 'e'.repeat(64), size: 8, bytes: new Uint8Array(8) }, permissions: [] }, clock.now());
  assert.equal((await call(rt.url, 'POST', `${base}/${action.id}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  const step = { id: 'score', type: 'custom_action', action_id: action.id, retry: { max_retries: 2, initial_ms: 1000, max_ms: 60_000 } };
  const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'offline', trigger_event: 'offline.go', steps: [step] } });
  assert.equal(workflow.status, 201, workflow.text);
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'offline.go', payload: {}, id: 'offline-1' } })).status, 202);
  const [reaction] = await eventually('the run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/offline-1`, { token: key })).body.reactions, (r: unknown[]) => r.length === 1);
  const runId = (reaction as { run_id: string }).run_id;

  const first = await runAfter(runId, 1, 'backoff');
  assert.equal(first.error, null, 'not failed at once');
  const refused = first.steps[0]!.attempts[0]!;
  assert.deepEqual({ outcome: refused.outcome, code: refused.error?.code, retryable: refused.error?.retryable }, { outcome: 'failed', code: 'hook_runner_unavailable', retryable: true });
  // Found and approved: the evidence names the call it would have made; nothing was started.
  assert.deepEqual(refused.evidence, { action_id: action.id, version: 1, digest: 'e'.repeat(64), idempotency_key: `${runId}:score` });
  assert.equal(refused.started_at, null);
  await retryAt(runId, assertRetryDue(Date.parse(first.retry_at!), clock.now(), 1000));
  const second = await runAfter(runId, 2, 'backoff');
  assert.equal(second.steps[0]!.attempts[1]!.error?.code, 'hook_runner_unavailable', 'the retry was attempted, and found no runner either');
  await retryAt(runId, assertRetryDue(Date.parse(second.retry_at!), clock.now(), 2000)); // the step's backoff doubles
  const failed = await runAfter(runId, 3, 'failed');
  assert.deepEqual({ code: failed.error?.code, reason: failed.error?.reason, step: failed.error?.step_id }, { code: 'hook_runner_unavailable', reason: 'retries_exhausted', step: 'score' });
  assert.deepEqual(failed.steps[0]!.attempts.map((a) => a.outcome), ['failed', 'failed', 'failed']);
  const triage = await call(rt.url, 'GET', `/organizations/${ORG}/failed-events`, { token: key });
  assert.ok(triage.body.failed_events.some((f: { event: { id: string } }) => f.event.id === 'offline-1'), 'listed for triage');
  // Resumable: the resumed step tries again (and, still without a runner, backs off once more).
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/runs/${runId}/resume`, { token: key })).status, 202);
  const resumed = await runAfter(runId, 4, 'backoff');
  assert.equal(resumed.steps[0]!.attempts[3]!.error?.code, 'hook_runner_unavailable');
});
