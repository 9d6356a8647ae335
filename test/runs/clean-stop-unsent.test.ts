// What a clean stop records of the step attempts it leaves open (boot-record.ts): those that had
// sent nothing read `effect_sent: "no"` after the restart, the others "unknown". Real runtimes on
// one data dir, a real receiver, and the real hook-runner child for a custom action. Left by
// session 52: a request still waiting for a connection at a stop was explained as "may have
// reached its target".

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { explainRun } from '../../runtime/explain-text.ts';
import { buildModules, uploadApproved } from '../actions/action-fixtures.ts';
import { invocation } from '../helpers/hook-runner.ts';
import { assembleWat, HOSTILE_WAT } from '../helpers/hook-runner-wat.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';

test('a clean stop names the attempts it left that had sent nothing: a request still waiting for a connection reads "nothing sent" after the restart, the one out "unknown"', async () => {
  const dataDir = tempDir();
  let release: () => void = () => undefined;
  const receiver = await startReceiver([{ status: 200, body: '{}', after: new Promise<void>((resolve) => (release = resolve)) }, { status: 200, body: '{}' }]);
  // One connection per receiver: the second run's request waits while the first one is out.
  const args = ['--webhook-connections', '1'];
  let rt = await startRuntime({ dataDir, args });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-held-stop', 'pro');
    const made = await call(rt.url, 'POST', '/organizations/acct-held-stop/workflows', { token: key, json: { name: 'w', trigger_event: 'e', steps: [{ id: 's', type: 'webhook', url: receiver.url }] } });
    assert.equal(made.status, 201, made.text);
    for (const id of ['evt_held_1', 'evt_held_2']) assert.equal((await call(rt.url, 'POST', '/organizations/acct-held-stop/events', { token: key, json: { type: 'e', payload: {}, id } })).status, 202);
    const engine = rt.runtime.engine;
    await eventually('one request out, one waiting', () => [receiver.received.length, engine.attemptsNeverSent().length], ([out, unsent]) => out === 1 && unsent === 1);
    await rt.close();
    assert.equal(receiver.received.length, 1, 'the waiting request was not sent at the stop');
    const outRunId = String(receiver.received[0]!.headers['idempotency-key']).split(':')[0];

    rt = await startRuntime({ dataDir, args });
    const runs = await eventually(
      'both runs completed after the restart',
      async () => (await call(rt.url, 'GET', '/organizations/acct-held-stop/runs', { token: key })).body.runs as Array<{ run_id: string; state: string }>,
      (list) => list.length === 2 && list.every((r) => r.state === 'completed'),
    );
    const views = await Promise.all(runs.map(async (r) => (await call(rt.url, 'GET', `/organizations/acct-held-stop/runs/${r.run_id}`, { token: key })).body.run));
    const outView = views.find((v) => v.run_id === outRunId);
    const heldView = views.find((v) => v.run_id !== outRunId);
    const firstAttempt = (view: { steps: Array<{ attempts: Array<{ outcome: string; started_at: string | null; evidence: unknown }> }> }) => view.steps[0]!.attempts[0]!;
    assert.deepEqual(firstAttempt(outView).evidence, { reason: 'runtime_stopped', effect_sent: 'unknown' });
    assert.deepEqual(firstAttempt(heldView).evidence, { reason: 'runtime_stopped', effect_sent: 'no' });
    assert.deepEqual([firstAttempt(heldView).outcome, firstAttempt(heldView).started_at], ['abandoned', null]);
    assert.match(explainRun(outView), /attempt 1 \(fence \d+\): abandoned; the runtime was stopped cleanly while it was out: it may have reached its target/);
    assert.match(explainRun(heldView), /attempt 1 \(fence \d+\): abandoned; nothing sent \(the runtime was stopped cleanly before it went out\)/);
    assert.equal(receiver.received.length, 3, 'each run sent once more after the restart');
  } finally {
    release();
    await rt.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a custom action call made before a clean stop counts as out: "unknown" after the restart, even while it waited in the hook-runner', async () => {
  const dataDir = tempDir();
  const args = ['--runner', 'child'];
  let rt = await startRuntime({ dataDir, args });
  try {
    const org = 'acct-action-stop';
    const { key, post, actionId } = await orgWithEcho(rt.url, org);
    assert.equal((await post('/workflows', { name: 'act', trigger_event: 'act', steps: [{ id: 'a', type: 'custom_action', action_id: actionId }] })).status, 201);
    // A first run: this start has sent a step, so the next one's call goes out as soon as it is made
    // (a start's first step waits for the record that it sends: stopped then, it was truly unsent).
    assert.equal((await post('/events', { type: 'act', id: 'act-0', payload: { n: 0 } })).status, 202);
    const [first] = (await call(rt.url, 'GET', `/organizations/${org}/events/act-0`, { token: key })).body.reactions;
    await eventually('the first run completed', async () => (await call(rt.url, 'GET', `/organizations/${org}/runs/${first.run_id}`, { token: key })).body.run.state, (state) => state === 'completed');
    const runner = rt.runtime.runner.client;
    assert.ok(runner !== undefined);
    const loop = await runner.compile(await assembleWat('loop', HOSTILE_WAT.loop), org);
    // Endless loops hold both guest slots (each until its fuel runs out): the run's call queues behind them.
    const backlog = Array.from({ length: 60 }, () => runner.invoke(invocation(loop, { orgId: org })).catch(() => undefined));
    assert.equal((await post('/events', { type: 'act', id: 'act-1', payload: { n: 1 } })).status, 202);
    const [reaction] = (await call(rt.url, 'GET', `/organizations/${org}/events/act-1`, { token: key })).body.reactions;
    const runPath = `/organizations/${org}/runs/${reaction.run_id}`;
    await eventually('the step attempt is out', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run, (r) => r.steps[0]?.attempts.length === 1);
    await rt.close();
    await Promise.all(backlog);

    rt = await startRuntime({ dataDir, args });
    const run = await eventually('the run completed after the restart', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run, (r) => r.state === 'completed');
    assert.deepEqual(run.steps[0].attempts[0].evidence, { reason: 'runtime_stopped', effect_sent: 'unknown' });
    assert.match(explainRun(run), /attempt 1 \(fence \d+\): abandoned; the runtime was stopped cleanly while it was out: it may have reached its target/);
  } finally {
    await rt.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a step counted as never sent at a clean stop is not sent after the count: a custom action still waiting for memory is not called, and reads "nothing sent"', async () => {
  const dataDir = tempDir();
  let release: () => void = () => undefined;
  const receiver = await startReceiver([{ status: 200, body: '{}', after: new Promise<void>((resolve) => (release = resolve)) }, { status: 200, body: '{}' }]);
  // A 1 MiB step input budget: the held webhook's 300 KB input keeps the action's 200 KB waiting for it.
  const args = ['--runner', 'child', '--step-input-mib', '1'];
  let rt = await startRuntime({ dataDir, args });
  try {
    const org = 'acct-sealed-stop';
    const { key, post, actionId } = await orgWithEcho(rt.url, org);
    assert.equal((await post('/workflows', { name: 'send', trigger_event: 'big', steps: [{ id: 's', type: 'webhook', url: receiver.url }] })).status, 201);
    assert.equal((await post('/workflows', { name: 'act', trigger_event: 'act', steps: [{ id: 'a', type: 'custom_action', action_id: actionId }] })).status, 201);
    assert.equal((await post('/events', { type: 'big', id: 'big-1', payload: { text: 'x'.repeat(300_000) } })).status, 202);
    await eventually('the webhook is out, holding its input', () => receiver.received.length, (n) => n === 1);
    // Its echo must fit the action output cap (256 KiB).
    assert.equal((await post('/events', { type: 'act', id: 'act-1', payload: { text: 'y'.repeat(200_000) } })).status, 202);
    const [reaction] = (await call(rt.url, 'GET', `/organizations/${org}/events/act-1`, { token: key })).body.reactions;
    const engine = rt.runtime.engine;
    await eventually('the action waits for memory', () => engine.attemptsNeverSent().map(([runKey]) => runKey.split('\u0000')[1]), (ids) => ids.includes(reaction.run_id));

    // The stop cuts the webhook off, which frees the memory the action waits for: it must not be called then.
    const runner = rt.runtime.runner.client;
    assert.ok(runner !== undefined);
    const invoke = runner.invoke.bind(runner);
    let callsAfterStop = 0;
    runner.invoke = (input) => {
      callsAfterStop += 1;
      return invoke(input);
    };
    await rt.close();
    assert.equal(callsAfterStop, 0, 'no custom action call once the stop began');

    rt = await startRuntime({ dataDir, args });
    const runPath = `/organizations/${org}/runs/${reaction.run_id}`;
    const run = await eventually('the action run completed after the restart', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run, (r) => r.state === 'completed');
    assert.deepEqual(run.steps[0].attempts[0].evidence, { reason: 'runtime_stopped', effect_sent: 'no' });
  } finally {
    release();
    await rt.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

/** A new org on the runtime at `url` with the echo action uploaded and approved: its key, a POST under it, and the action's id. */
async function orgWithEcho(url: string, org: string): Promise<{ key: string; post: (path: string, json: unknown) => ReturnType<typeof call>; actionId: string }> {
  const key = await createOrg(url, ADMIN_TOKEN, org);
  const post = (path: string, json: unknown) => call(url, 'POST', `/organizations/${org}${path}`, { token: key, json });
  return { key, post, actionId: await uploadApproved(url, org, key, 'echo', (await buildModules()).echo) };
}
