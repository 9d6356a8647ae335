// A sandbox step that passed the plan check and then waited (for step-input memory, for a
// connection to its receiver, or in the hook-runner for a guest slot) sends nothing once the org's
// plan has lost its sandbox meanwhile: its attempt fails as sandbox_disabled, unsent, and the run
// ends. A run cancelled before the downgrade keeps its own reason.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { invocation } from '../helpers/hook-runner.ts';
import { assembleWat, HOSTILE_WAT } from '../helpers/hook-runner-wat.ts';
import { buildModules, uploadApproved } from '../actions/action-fixtures.ts';

let rt: TestRuntime;
const receivers: Receiver[] = [];

before(async () => {
  // One connection per org and receiver, and 1 MiB of step input (an org's share: 128 KiB).
  rt = await startRuntime({ args: ['--webhook-connections', '1', '--step-input-mib', '1'] });
});
after(async () => {
  await rt.close();
  for (const receiver of receivers) await receiver.close();
});

const metric = async (name: string): Promise<number> => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec((await call(rt.url, 'GET', '/metrics', { token: ADMIN_TOKEN })).text)?.[1] ?? Number.NaN);

/** A pro org with a sandbox workflow posting to a receiver whose first answer waits for `release`. */
async function heldSandboxOrg(org: string): Promise<{ receiver: Receiver; release: () => void; send: (id: string, payload: unknown) => Promise<void>; runOf: (id: string) => Promise<string>; path: string; key: string }> {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const receiver = await startReceiver([{ status: 200, body: '{}', after: held }, { status: 200, body: '{}' }]);
  receivers.push(receiver);
  const key = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const path = `/organizations/${org}`;
  const flow = { name: 'sandboxed', environment: 'sandbox', trigger_event: 'sbx.wait', steps: [{ id: 'send', type: 'webhook', url: `${receiver.url}/sbx` }] };
  const created = await call(rt.url, 'POST', `${path}/workflows`, { token: key, json: flow });
  assert.equal(created.status, 201, created.text);
  const send = async (id: string, payload: unknown): Promise<void> => {
    const sent = await call(rt.url, 'POST', `${path}/events`, { token: key, json: { type: 'sbx.wait', id, payload, environment: 'sandbox' } });
    assert.equal(sent.status, 202, sent.text);
  };
  const runOf = async (id: string): Promise<string> => {
    const event = await eventually(`the run of ${id}`, async () => (await call(rt.url, 'GET', `${path}/events/${id}?environment=sandbox`, { token: key })).body, (body) => body?.reactions?.length === 1);
    return event.reactions[0].run_id as string;
  };
  return { receiver, release, send, runOf, path, key };
}

/** A held sandbox org with two events sent: the first's request out (held), the second's run (`waiting`) waiting for the org's one connection. */
async function secondWaitingForConnection(org: string, prefix: string) {
  const held = await heldSandboxOrg(org);
  await held.send(`${prefix}-1`, {});
  await eventually('the first request out (held)', () => held.receiver.received.length, (n) => n === 1);
  await held.send(`${prefix}-2`, {});
  await eventually('the second request waits for the org\'s one connection', () => metric('sluice_webhook_requests_waiting'), (n) => n === 1);
  return { ...held, waiting: await held.runOf(`${prefix}-2`) };
}

async function assertFailedUnsent(org: string, runId: string, receiver: Receiver, path: string, key: string): Promise<void> {
  await eventually('the run failed', () => rt.runtime.context.runs.get(org, runId), (run) => run?.value === 'failed');
  // Read back through the API once the plan has a sandbox again.
  assert.equal((await call(rt.url, 'PATCH', path, { token: ADMIN_TOKEN, json: { plan: 'pro' } })).status, 200);
  const view = (await call(rt.url, 'GET', `${path}/runs/${runId}?environment=sandbox`, { token: key })).body.run;
  const attempt = view.steps[0].attempts[0];
  assert.deepEqual({ state: view.state, outcome: attempt.outcome, code: attempt.error?.code, started: attempt.started_at }, { state: 'failed', outcome: 'failed', code: 'sandbox_disabled', started: null });
  assert.equal(receiver.received.length, 1, 'only the request out before the downgrade reached the receiver');
}

test('a sandbox step waiting for step-input memory when the plan loses its sandbox fails sandbox_disabled, unsent', async () => {
  const org = 'acct-downgrade-memory';
  const { receiver, release, send, runOf, path, key } = await heldSandboxOrg(org);
  const blob = 'x'.repeat(100 * 1024);
  await send('mem-1', { blob });
  await eventually('the first request out (held)', () => receiver.received.length, (n) => n === 1);
  await send('mem-2', { blob });
  await eventually('the second step waits for the org\'s share', () => metric('sluice_steps_waiting_for_memory'), (n) => n === 1);
  const waiting = await runOf('mem-2');
  assert.equal((await call(rt.url, 'PATCH', path, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
  release();
  await assertFailedUnsent(org, waiting, receiver, path, key);
});

test('a sandbox step waiting for a connection when the plan loses its sandbox fails sandbox_disabled, unsent', async () => {
  const org = 'acct-downgrade-connection';
  const { receiver, release, path, key, waiting } = await secondWaitingForConnection(org, 'conn');
  assert.equal((await call(rt.url, 'PATCH', path, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
  release();
  await assertFailedUnsent(org, waiting, receiver, path, key);
});

test('a sandbox run cancelled while its webhook waits for a connection, its org downgraded after, records the cancel\'s withdrawal, not the plan', async () => {
  const org = 'acct-cancel-then-downgrade';
  const { receiver, release, path, key, waiting } = await secondWaitingForConnection(org, 'c');
  const cancelled = await call(rt.url, 'POST', `${path}/runs/${waiting}/cancel?environment=sandbox`, { token: key, json: {} });
  assert.equal(cancelled.status, 200, cancelled.text);
  assert.equal((await call(rt.url, 'PATCH', path, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
  release();
  const run = await eventually('the withdrawn attempt recorded', () => rt.runtime.context.runs.get(org, waiting), (r) => r?.context.steps[0]?.attempts[0]?.afterCancel !== undefined);
  assert.equal(run!.value, 'cancelled');
  assert.equal(run!.context.steps[0]!.attempts[0]!.afterCancel!.error?.code, 'webhook_withdrawn');
  assert.equal(receiver.received.length, 1);
});

test('a sandbox custom action step waiting in the hook-runner for a guest slot when the plan loses its sandbox is dropped unrun: sandbox_disabled', async () => {
  const runtime = await startRuntime({ args: ['--runner', 'child'] });
  try {
    const org = 'acct-downgrade-runner-slot';
    const key = await createOrg(runtime.url, ADMIN_TOKEN, org, 'pro');
    const post = (path: string, json: unknown) => call(runtime.url, 'POST', `/organizations/${org}${path}`, { token: key, json });
    const actionId = await uploadApproved(runtime.url, org, key, 'echo', (await buildModules()).echo);
    const flow = await post('/workflows', { name: 'act', environment: 'sandbox', trigger_event: 'act', steps: [{ id: 'a', type: 'custom_action', action_id: actionId }] });
    assert.equal(flow.status, 201, flow.text);
    // The org's guest slots taken by endless loops (each stopped by fuel): the step's call waits behind them.
    const runner = runtime.runtime.runner.client!;
    const loop = await runner.compile(await assembleWat('loop', HOSTILE_WAT.loop), org);
    let settled = 0;
    const backlog = Array.from({ length: 40 }, () => runner.invoke(invocation(loop, { orgId: org })).finally(() => void settled++));
    const sent = await post('/events', { type: 'act', id: 'act-1', payload: { n: 1 }, environment: 'sandbox' });
    assert.equal(sent.status, 202, sent.text);
    const [reaction] = (await call(runtime.url, 'GET', `/organizations/${org}/events/act-1?environment=sandbox`, { token: key })).body.reactions;
    await eventually('the step attempt is out', () => runtime.runtime.context.runs.get(org, reaction.run_id), (run) => run?.context.steps[0]?.attempts.length === 1);
    assert.equal((await call(runtime.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
    assert.ok(settled < 38, `the step's call still waits behind the loops (${settled} of 40 done)`);
    const run = await eventually('the run failed', () => runtime.runtime.context.runs.get(org, reaction.run_id), (r) => r?.value === 'failed' || r?.value === 'completed', 30_000);
    assert.ok(settled < 40, 'it failed before the loops ahead of it were all done: dropped in the queue');
    await Promise.allSettled(backlog);
    const attempt = run!.context.steps[0]!.attempts[0]!;
    assert.deepEqual({ state: run!.value, outcome: attempt.outcome, code: attempt.error?.code }, { state: 'failed', outcome: 'failed', code: 'sandbox_disabled' });
    assert.equal((attempt.evidence as { fuel_used?: number } | null)?.fuel_used, undefined, 'the guest never ran');
  } finally {
    await runtime.close();
  }
});
