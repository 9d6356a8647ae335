// A hook-runner that refuses the runtime's runner token (restarted with another one: a deployment
// fault) through the real runtime and runner processes: custom_action steps retry under their
// retry policy, the runtime logs a warning, and once a runner with the right token is back within
// that budget the run completes; it used to fail every run in that window at the first attempt.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Logger } from '../../runtime/log.ts';
import { buildModules, upload } from '../actions/action-fixtures.ts';
import { newToken, startRunner, tempDataDir, waitFor, type RunnerFixture } from '../helpers/hook-runner.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-token-refused';
let rt: TestRuntime;
let key: string;
let runner: RunnerFixture;
let token: string;
let listen: string;
const warnings: string[] = [];
const logger: Logger = { debug: () => undefined, info: () => undefined, warn: (message) => void warnings.push(message), error: () => undefined };

const post = (path: string, json?: unknown) => call(rt.url, 'POST', `/organizations/${ORG}${path}`, { token: key, ...(json === undefined ? {} : { json }) });

interface Run { run_id: string; state: string; steps: Array<{ attempts: Array<{ outcome: string; error?: { code: string; retryable: boolean } }> }> }

before(async () => {
  const modules = await buildModules();
  listen = `unix:${join(tempDataDir(), 'runner.sock')}`;
  rt = await startRuntime({ args: ['--runner', listen], logger });
  token = readFileSync(join(rt.dataDir, 'runner-token'), 'utf8').trim();
  runner = await startRunner({ token, child: { listen } });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name: 'echo', file: modules.echo });
  assert.equal(uploaded.status, 201, uploaded.text);
  const id: string = uploaded.body.custom_action.id;
  assert.equal((await post(`/custom-actions/${id}/review`, { status: 'approved', version: 1 })).status, 200);
  const retry = { max_retries: 20, initial_ms: 200, max_ms: 200 };
  const workflow = await post('/workflows', { name: 'echo', trigger_event: 'orders.created', steps: [{ id: 'act', type: 'custom_action', action_id: id, retry }] });
  assert.equal(workflow.status, 201, workflow.text);
});
after(async () => {
  await rt.close();
  await runner.close();
});

/** Replaces the runner with one at the same address that takes `runnerToken`. */
async function replaceRunner(runnerToken: string): Promise<void> {
  await runner.close();
  runner = await startRunner({ token: runnerToken, child: { listen } });
}

test('a refused runner token makes custom_action steps retry, with a warning; the run completes once the tokens match again', async () => {
  await replaceRunner(newToken());
  const sent = await post('/events', { type: 'orders.created', payload: { order_id: 'o-1' }, id: 'o-1' });
  assert.equal(sent.status, 202, sent.text);
  const reactions = await eventually('the run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/o-1`, { token: key })).body.reactions, (r) => r.length === 1);
  const runPath = `/organizations/${ORG}/runs/${reactions[0].run_id}`;
  const refused = await eventually('a refused attempt', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run as Run, (run) => run.steps[0]!.attempts.length >= 2);
  assert.notEqual(refused.state, 'failed');
  assert.deepEqual(refused.steps[0]!.attempts[0]!.error, { ...refused.steps[0]!.attempts[0]!.error, code: 'hook_runner_unauthenticated', retryable: true });
  assert.ok(warnings.some((line) => /refused the runner token/.test(line)), warnings.join('\n'));
  assert.equal(warnings.filter((line) => /refused the runner token/.test(line)).length, 1, 'at most one such warning a minute');

  await replaceRunner(token);
  const client = rt.runtime.runner.client;
  assert.ok(client !== undefined);
  await waitFor(async () => client.health().then(() => true, () => false), 'the runtime to reach the runner again');
  const done = await eventually('the run to complete', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run as Run, (run) => run.state === 'completed', 20_000);
  assert.equal(done.steps[0]!.attempts.at(-1)!.outcome, 'succeeded');
});
