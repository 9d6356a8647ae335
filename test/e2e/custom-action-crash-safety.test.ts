// Crash safety of a custom_action step, through the real runtime and hook-runner processes: the
// runtime is SIGKILLed after the runner ran and recorded the call but before its answer reached the
// runtime (a proxy between the two holds the runner's answers back), and restarted on the same data
// dir. The attempt is closed as abandoned, the step goes out again under the same idempotency key and
// a higher fence, the runner answers from its record (the guest does not run twice), the run
// completes, and its projection row and derived event are written once.

import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { open } from 'lmdb';
import { upload } from '../actions/action-fixtures.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { startRunner, tempDataDir, waitFor, type RunnerFixture } from '../helpers/hook-runner.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, spawnRuntime, tempDir, type ChildRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-crash-action';

interface Attempt { fence: number; outcome: string; error: { code: string } | null; evidence: { idempotency_key?: string; replayed?: boolean; reason?: string; effect_sent?: string } | null }
interface Run { run_id: string; state: string; steps: Array<{ status: string; attempts: Attempt[] }> }

const SCORED = {
  score: 7,
  projection: { name: 'order-risk', entity_type: 'order', entity_id: 'ord_crash', status: 'review', data: { score: 7 } },
  derived_event: { type: 'orders.scored', payload: { order_id: 'ord_crash', score: 7 } },
};

/** A unix-socket proxy from the runtime to the runner; `holdAnswers` keeps what the runner sends back from then on. */
async function runnerProxy(path: string, runnerPath: string): Promise<{ holdAnswers: () => void; close: () => Promise<void> }> {
  let holding = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((fromRuntime) => {
    const toRunner = createConnection(runnerPath);
    for (const socket of [fromRuntime, toRunner]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        fromRuntime.destroy();
        toRunner.destroy();
      });
    }
    fromRuntime.on('data', (chunk) => toRunner.write(chunk));
    toRunner.on('data', (chunk) => void (holding || fromRuntime.write(chunk)));
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return {
    holdAnswers: () => void (holding = true),
    close: () => new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
}

test('SIGKILL while an Invoke is out: the step goes out again under the same key and a higher fence, and its effects are written once', async () => {
  const dataDir = tempDir();
  const socketDir = tempDataDir();
  const proxy = await runnerProxy(join(socketDir, 'proxy.sock'), join(socketDir, 'runner.sock'));
  const toRunner = ['--runner', `unix:${join(socketDir, 'proxy.sock')}`];
  let runtime: ChildRuntime | undefined;
  let runner: RunnerFixture | undefined;
  try {
    runtime = await spawnRuntime(dataDir, 'serve', toRunner);
    // The runtime made its runner token on start; the runner is given the same one.
    runner = await startRunner({ token: readFileSync(join(dataDir, 'runner-token'), 'utf8').trim(), child: { listen: `unix:${join(socketDir, 'runner.sock')}` } });
    let url = runtime.url;
    const key = await createOrg(url, ADMIN_TOKEN, ORG);
    const org = (method: string, path: string, json?: unknown) => call(url, method, `/organizations/${ORG}${path}`, { token: key, ...(json === undefined ? {} : { json }) });

    const uploaded = await upload(url, `/organizations/${ORG}/custom-actions`, key, { name: 'scorer', file: await assembleWat('scorer', constantWat(JSON.stringify(SCORED))) });
    assert.equal(uploaded.status, 201, uploaded.text);
    const actionId: string = uploaded.body.custom_action.id;
    assert.equal((await org('POST', `/custom-actions/${actionId}/review`, { status: 'approved', version: 1 })).status, 200);
    assert.equal((await org('POST', '/workflows', { name: 'score', trigger_event: 'orders.created', steps: [{ id: 'score', type: 'custom_action', action_id: actionId }] })).status, 201);

    // From here the runner's answers stop at the proxy: the event's Invoke reaches the runner, which
    // runs the guest and records its answer before sending it.
    proxy.holdAnswers();
    assert.equal((await org('POST', '/events', { type: 'orders.created', payload: { order_id: 'ord_crash' }, id: 'evt-crash' })).status, 202);
    const reactions = await eventually('the run', async () => (await org('GET', '/events/evt-crash')).body.reactions as Array<{ run_id: string }>, (r) => r.length === 1);
    const runId = reactions[0]!.run_id;
    const runOf = async (): Promise<Run> => (await org('GET', `/runs/${runId}`)).body.run as Run;
    const store = open({ path: join(runner.dataDir, 'hook-runner', 'runner.mdb'), maxDbs: 16, readOnly: true });
    try {
      const invocations = store.openDB({ name: 'invocations', encoding: 'msgpack' });
      await waitFor(() => {
        store.resetReadTxn();
        return invocations.get([ORG, `${runId}:score`]) !== undefined;
      }, 'the runner\'s record of the call');
    } finally {
      await store.close();
    }
    const before = await runOf();
    assert.deepEqual([before.state, before.steps[0]!.attempts.map((a) => a.outcome)], ['running', ['pending']], 'the answer never reached the runtime');
    runtime.child.kill('SIGKILL');
    await runtime.exited;
    await proxy.close();
    // Restarted straight onto the runner.
    runtime = await spawnRuntime(dataDir, 'serve', ['--runner', `unix:${join(socketDir, 'runner.sock')}`]);
    url = runtime.url;

    const run = await eventually('the run completed', runOf, (r) => r.state === 'completed', 20_000);
    const [first, second] = run.steps[0]!.attempts;
    assert.equal(run.steps[0]!.attempts.length, 2, JSON.stringify(run.steps[0]));
    assert.deepEqual([first!.fence, first!.outcome], [1, 'abandoned']);
    // The runtime cannot tell whether the runner ran the call it had out: it says so.
    assert.deepEqual(first!.evidence, { reason: 'runtime_restarted', effect_sent: 'unknown' });
    assert.deepEqual([second!.fence, second!.outcome], [2, 'succeeded']);
    assert.equal(second!.evidence?.idempotency_key, `${runId}:score`, 'the key derived from the run and step');
    assert.equal(second!.evidence?.replayed, true, 'answered from the record of the first call: the guest ran once');

    // Written once: the row's first revision, and one derived event.
    const row = await org('GET', '/projections/order-risk/order/ord_crash');
    assert.equal(row.status, 200, row.text);
    assert.deepEqual([row.body.row.revision, row.body.row.run_id, row.body.row.data], [1, runId, { score: 7 }], row.text);
    const derived = await org('GET', '/events?type=orders.scored');
    assert.equal(derived.body.events.length, 1, derived.text);
  } finally {
    runtime?.child.kill('SIGKILL');
    await runtime?.exited;
    await runner?.close();
    await proxy.close();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(socketDir, { recursive: true, force: true });
  }
});
