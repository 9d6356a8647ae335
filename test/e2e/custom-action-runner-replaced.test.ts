// A hook-runner replaced by one on a fresh data dir (a new machine, a wiped disk), through the real
// runtime and real runner processes: the runtime sends the module it kept and the run completes with
// the guest run once; a version recorded before the runtime kept bytes fails, saying to upload again.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { startRunner, tempDataDir, waitFor, type RunnerFixture } from '../helpers/hook-runner.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { buildModules, upload } from '../actions/action-fixtures.ts';
import { SecretNames } from '../../runtime/actions/secret-names.ts';

const ORG = 'acct-replaced';
let rt: TestRuntime;
let key: string;
let runner: RunnerFixture;
let token: string;
let listen: string;

const post = (path: string, json?: unknown) => call(rt.url, 'POST', `/organizations/${ORG}${path}`, { token: key, ...(json === undefined ? {} : { json }) });

interface Attempt { fence: number; outcome: string; error?: { code: string; message: string; retryable: boolean }; evidence?: { digest: string; replayed: boolean } }
interface Run { run_id: string; state: string; steps: Array<{ id: string; result: unknown; attempts: Attempt[] }> }

/** An approved action running `module`, and a workflow on `trigger` whose one step runs it. */
async function approvedAction(name: string, module: Uint8Array, trigger: string): Promise<{ id: string; digest: string }> {
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name, file: module });
  assert.equal(uploaded.status, 201, uploaded.text);
  const id: string = uploaded.body.custom_action.id;
  assert.equal((await post(`/custom-actions/${id}/review`, { status: 'approved', version: 1 })).status, 200);
  const workflow = await post('/workflows', { name, trigger_event: trigger, steps: [{ id: 'act', type: 'custom_action', action_id: id }] });
  assert.equal(workflow.status, 201, workflow.text);
  return { id, digest: uploaded.body.custom_action.versions[0].digest };
}

/** Sends an event and answers its one run once that has settled with `attempts` attempts. */
async function runFor(type: string, eventId: string, attempts = 1): Promise<Run> {
  const sent = await post('/events', { type, payload: { order_id: eventId }, id: eventId });
  assert.equal(sent.status, 202, sent.text);
  return settled(eventId, attempts);
}

async function settled(eventId: string, attempts: number): Promise<Run> {
  const reactions = await eventually(`the run of ${eventId}`, async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key })).body.reactions, (r) => r.length === 1);
  return eventually(
    `run of ${eventId} settled after ${attempts} attempt(s)`,
    async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${reactions[0].run_id}`, { token: key })).body.run as Run,
    (run) => ['failed', 'completed'].includes(run.state) && run.steps[0]!.attempts.length === attempts,
    20_000,
  );
}

let echo: { id: string; digest: string };
let legacy: { id: string; digest: string };
let legacyModule: Uint8Array;

before(async () => {
  const modules = await buildModules();
  legacyModule = await assembleWat('legacy', constantWat(JSON.stringify({ legacy: true })));
  listen = `unix:${join(tempDataDir(), 'runner.sock')}`;
  rt = await startRuntime({ args: ['--runner', listen] });
  // The runtime made its runner token on start; the runners are given the same one.
  token = readFileSync(join(rt.dataDir, 'runner-token'), 'utf8').trim();
  runner = await startRunner({ token, child: { listen } });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  echo = await approvedAction('echo', modules.echo, 'orders.created');
  legacy = await approvedAction('legacy', legacyModule, 'legacy.created');

  await replaceRunner();
});

/** Stops the runner, deletes its data dir, and starts a new one on a fresh data dir at the same address. */
async function replaceRunner(): Promise<void> {
  await runner.close();
  runner = await startRunner({ token, child: { listen } });
  const client = rt.runtime.runner.client;
  assert.ok(client !== undefined);
  await waitFor(async () => (await client.health().then(() => true, () => false)), 'the runtime to reach the new runner');
}
after(async () => {
  await rt.close();
  await runner.close();
});

test('a runner on a fresh data dir is sent the module the runtime kept: the run completes, the guest ran once', async () => {
  const run = await runFor('orders.created', 'order-1');
  const attempt = run.steps[0]!.attempts[0]!;
  assert.equal(run.state, 'completed', JSON.stringify(attempt));
  assert.equal(attempt.outcome, 'succeeded');
  assert.deepEqual({ digest: attempt.evidence?.digest, replayed: attempt.evidence?.replayed }, { digest: echo.digest, replayed: false });
  assert.deepEqual((run.steps[0]!.result as { payload: unknown }).payload, { order_id: 'order-1' });

  // The new runner recorded that one execution under the step's key and fence: the same call again is answered from it.
  const again = await runner.client.invoke({
    orgId: ORG, actionId: echo.id, digest: echo.digest, permissions: [], payloadJson: '{"order_id":"order-1"}',
    idempotencyKey: `${run.run_id}:${run.steps[0]!.id}`, fence: attempt.fence,
  });
  assert.equal(again.replayed, true);
});

test('a version recorded before the runtime kept module bytes fails module_not_found, not retried, saying to upload again; an upload fixes it', async () => {
  // What a data dir from before this release holds: the version record without its module's bytes.
  await rt.runtime.ledger.openDatabase('custom-action-modules').remove([ORG, legacy.digest]);
  const failed = await runFor('legacy.created', 'legacy-1');
  const attempt = failed.steps[0]!.attempts[0]!;
  assert.equal(failed.state, 'failed');
  assert.equal(attempt.error?.code, 'module_not_found');
  assert.equal(attempt.error?.retryable, false);
  assert.match(attempt.error?.message ?? '', /uploaded before Sluice kept module bytes.*Upload the action's module again/);

  const v2 = await upload(rt.url, `/organizations/${ORG}/custom-actions/${legacy.id}/versions`, key, { file: legacyModule });
  assert.equal(v2.status, 201, v2.text);
  assert.equal((await post(`/custom-actions/${legacy.id}/review`, { status: 'approved', version: 2 })).status, 200);
  assert.equal((await post(`/runs/${failed.run_id}/resume`)).status, 202);
  const resumed = await settled('legacy-1', 2);
  assert.equal(resumed.state, 'completed', JSON.stringify(resumed.steps[0]!.attempts[1]));
  assert.deepEqual(resumed.steps[0]!.result, { legacy: true });
});

test('simulate sends a lost module again too', async () => {
  await replaceRunner();
  const simulated = await post(`/custom-actions/${echo.id}/simulate`, { payload: { order_id: 'sim-1' } });
  assert.equal(simulated.status, 200, simulated.text);
  assert.deepEqual({ outcome: simulated.body.outcome, payload: simulated.body.output.payload }, { outcome: 'output', payload: { order_id: 'sim-1' } });
});

/**
 * An approved action answering `output` that reads secret API_TOKEN, set through the runtime, and a
 * workflow on `trigger` running it with quick retries; the module's bytes come back for re-uploads.
 */
async function secretReadingAction(name: string, trigger: string, output: unknown): Promise<{ id: string; module: Uint8Array }> {
  const module = await assembleWat(name, constantWat(JSON.stringify(output)));
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name, file: module, permissions: 'read_secret:API_TOKEN' });
  assert.equal(uploaded.status, 201, uploaded.text);
  const id: string = uploaded.body.custom_action.id;
  assert.equal((await post(`/custom-actions/${id}/review`, { status: 'approved', version: 1 })).status, 200);
  assert.equal((await post(`/custom-actions/${id}/secrets`, { key: 'API_TOKEN', value: 'token-value-123456' })).status, 204);
  const retry = { max_retries: 20, initial_ms: 100, max_ms: 100 };
  assert.equal((await post('/workflows', { name, trigger_event: trigger, steps: [{ id: 'act', type: 'custom_action', action_id: id, retry }] })).status, 201);
  return { id, module };
}

/** The path of the one run of event `eventId`, once the event has it. */
async function runPathOf(eventId: string): Promise<string> {
  const reactions = await eventually('the run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key })).body.reactions, (r) => r.length === 1);
  return `/organizations/${ORG}/runs/${reactions[0].run_id}`;
}

test('secrets set through the runtime and lost with the runner hold the call back (not sent, retried) until they are set again', async () => {
  const { id } = await secretReadingAction('secretive', 'secret.needed', { secretive: true });
  await replaceRunner();

  assert.equal((await post('/events', { type: 'secret.needed', payload: {}, id: 'secret-1' })).status, 202);
  const runPath = await runPathOf('secret-1');
  const held = await eventually('an attempt held back', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run as Run & { steps: Array<{ attempts: Array<Attempt & { started_at: string | null }> }> }, (run) => run.steps[0]!.attempts.length >= 1 && run.steps[0]!.attempts[0]!.outcome === 'failed');
  const first = held.steps[0]!.attempts[0]!;
  assert.deepEqual({ code: first.error?.code, retryable: first.error?.retryable, started: first.started_at }, { code: 'secrets_missing_on_runner', retryable: true, started: null });
  assert.match(first.error?.message ?? '', /API_TOKEN/);

  assert.equal((await post(`/custom-actions/${id}/secrets`, { key: 'API_TOKEN', value: 'token-value-123456' })).status, 204);
  const done = await eventually('the run completes', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run as Run, (run) => run.state === 'completed', 20_000);
  assert.deepEqual(done.steps[0]!.result, { secretive: true });
});

test('an action that ran with its secrets is held back after the runner is replaced, also when its module came back by an upload (here another org\'s)', async () => {
  const { id, module } = await secretReadingAction('keyed', 'keyed.needed', { keyed: true });
  assert.equal((await runFor('keyed.needed', 'keyed-1')).state, 'completed', 'it ran with its secret');

  await replaceRunner();
  const other = await createOrg(rt.url, ADMIN_TOKEN, 'acct-replaced-other');
  const reupload = await upload(rt.url, '/organizations/acct-replaced-other/custom-actions', other, { name: 'same-bytes', file: module });
  assert.equal(reupload.status, 201, `the module is on the new runner again: ${reupload.text}`);

  assert.equal((await post('/events', { type: 'keyed.needed', payload: {}, id: 'keyed-2' })).status, 202);
  const runPath = await runPathOf('keyed-2');
  const held = await eventually('an attempt held back', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run as Run, (run) => run.steps[0]!.attempts.length >= 1 && run.steps[0]!.attempts[0]!.outcome === 'failed');
  assert.equal(held.steps[0]!.attempts[0]!.error?.code, 'secrets_missing_on_runner', JSON.stringify(held.steps[0]!.attempts[0]));
  assert.notEqual(held.state, 'completed');
  assert.equal((await post(`/custom-actions/${id}/secrets`, { key: 'API_TOKEN', value: 'token-value-123456' })).status, 204);
  assert.equal((await eventually('the run completes', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run as Run, (run) => run.state === 'completed', 20_000)).state, 'completed');
});

test('a secret delete stopped between its two writes (the runner deleted the value, the name is still marked) holds no call back; sent again, it finishes', async () => {
  const { id } = await secretReadingAction('forgotten', 'forgotten.needed', { forgotten: true });
  // What a stop between the DELETE's writes leaves: the name marked as being deleted, the runner without the value.
  const names = new SecretNames(rt.runtime.ledger);
  await names.markDeleting(ORG, id, 'API_TOKEN');
  assert.equal(await runner.client.deleteSecret({ orgId: ORG, actionId: id, key: 'API_TOKEN' }), true);
  const run = await runFor('forgotten.needed', 'forgotten-1');
  assert.equal(run.state, 'completed', JSON.stringify(run.steps[0]!.attempts));

  const remove = () => call(rt.url, 'DELETE', `/organizations/${ORG}/custom-actions/${id}/secrets/API_TOKEN`, { token: key });
  assert.equal((await remove()).status, 204, 'a name left marked is still there to delete');
  assert.deepEqual(names.named(ORG, id), []);
  assert.equal((await remove()).status, 404);
});

test('a secret DELETE the hook-runner does not answer leaves the secret required, as before it', async () => {
  const { id } = await secretReadingAction('kept', 'kept.needed', { kept: true });
  await runner.child.stop();
  const refused = await call(rt.url, 'DELETE', `/organizations/${ORG}/custom-actions/${id}/secrets/API_TOKEN`, { token: key });
  assert.equal(refused.status, 503, refused.text);
  assert.deepEqual(new SecretNames(rt.runtime.ledger).of(ORG, id), ['API_TOKEN']);
});
