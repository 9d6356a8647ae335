// A run cancelled while its custom action's call waits in the hook-runner for a guest slot withdraws
// the call: the runner drops it unrun, and the attempt's after_cancel says custom_action_withdrawn.
// On a real runtime with its real hook-runner child: the org's endless-loop guests, invoked through
// the runtime's own runner client, hold both guest slots while the run's call queues behind them.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, createOrg } from '../helpers/http.ts';
import { invocation } from '../helpers/hook-runner.ts';
import { assembleWat, HOSTILE_WAT } from '../helpers/hook-runner-wat.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';
import { buildModules, uploadApproved } from '../actions/action-fixtures.ts';

test('a run cancelled while its custom action call waits for a guest slot does not run the guest', async () => {
  const rt = await startRuntime({ args: ['--runner', 'child'] });
  try {
    const org = 'acct-withdrawn-invoke';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    const post = (path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: key, json });
    const actionId = await uploadApproved(rt.url, org, key, 'echo', (await buildModules()).echo);
    assert.equal((await post('/workflows', { name: 'act', trigger_event: 'act', steps: [{ id: 'a', type: 'custom_action', action_id: actionId }] })).status, 201);

    const runner = rt.runtime.runner.client;
    assert.ok(runner !== undefined);
    const loop = await runner.compile(await assembleWat('loop', HOSTILE_WAT.loop), org);
    // Each loop spends its fuel (tens of ms) in one of the two slots: the org's calls queue behind them.
    const backlog = Array.from({ length: 60 }, () => runner.invoke(invocation(loop, { orgId: org })));
    assert.equal((await post('/events', { type: 'act', id: 'act-1', payload: { n: 1 } })).status, 202);
    const [reaction] = (await call(rt.url, 'GET', `/organizations/${org}/events/act-1`, { token: key })).body.reactions;
    const runPath = `/organizations/${org}/runs/${reaction.run_id}`;
    await eventually('the step attempt is out', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run, (r) => r.steps[0]?.attempts.length === 1);
    assert.equal((await post(`/runs/${reaction.run_id}/cancel`, {})).status, 200);

    const run = await eventually('the withdrawn attempt recorded', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run, (r) => r.steps[0].attempts[0].after_cancel !== null);
    const late = run.steps[0].attempts[0].after_cancel;
    assert.deepEqual({ state: run.state, outcome: late.outcome, code: late.error?.code }, { state: 'cancelled', outcome: 'failed', code: 'custom_action_withdrawn' });
    for (const loopCall of backlog) assert.equal((await loopCall).outcome.kind, 'trap');
    // The runner recorded nothing under the attempt's key: the same key (at a higher fence) runs the guest afresh.
    const idempotencyKey: string = late.evidence.idempotency_key;
    const digest: string = late.evidence.digest;
    const probe = await runner.invoke(invocation(digest, { orgId: org, actionId, idempotencyKey, fence: 1_000, payloadJson: '{"n":1}' }));
    assert.deepEqual([probe.outcome.kind, probe.replayed], ['output', false], 'the guest never ran for the cancelled run');
  } finally {
    await rt.close();
  }
});
