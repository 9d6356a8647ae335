// A recorded Invoke whose caller gave up (its deadline passed, or its signal aborted: the run left
// the attempt) while it waited for a guest slot is dropped when its turn comes: nothing runs and
// nothing is recorded, so under a backlog the slots go to calls whose answers are awaited. Through
// the real runner: one org's endless-loop guests hold both slots, and a call queued behind them gives up.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { CallWithdrawnError } from '../../runtime/hook-runner/runner-errors.ts';
import { invocation, startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat, ECHO_WAT, HOSTILE_WAT } from '../helpers/hook-runner-wat.ts';

let runner: RunnerFixture;
let echo: string;
let loop: string;

before(async () => {
  runner = await startRunner();
  echo = await runner.client.compile(await assembleWat('echo', ECHO_WAT));
  loop = await runner.client.compile(await assembleWat('loop', HOSTILE_WAT.loop));
});
after(() => runner.close());

test('a call whose deadline passed before its guest slot came is not run or recorded; its retry runs it', async () => {
  // Each loop spends its 50,000,000 fuel (tens of ms); 24 of them keep both slots busy for a while.
  const backlog = Array.from({ length: 24 }, () => runner.client.invoke(invocation(loop, { orgId: 'org_busy' })));
  const impatient = new HookRunnerClient(() => runner.child.address(), runner.token, { deadlinesMs: { invoke: 40 }, attempts: 1 });
  const key = 'run_abandoned:step_1';
  try {
    await assert.rejects(impatient.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 1, payloadJson: '{"n":1}' })));
  } finally {
    impatient.close();
  }
  for (const call of backlog) assert.equal((await call).outcome.kind, 'trap');

  // Dropped unrun: the next attempt runs the guest (not a replay of a recorded answer)...
  const retry = await runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 2, payloadJson: '{"n":1}' }));
  assert.equal(retry.outcome.kind, 'output');
  assert.equal(retry.replayed, false, 'the abandoned call recorded nothing');
  // ...and what it runs is recorded as ever.
  const again = await runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 3, payloadJson: '{"n":1}' }));
  assert.equal(again.replayed, true);
});

test('a call withdrawn by its signal while it waits for a guest slot is cancelled and not run; one withdrawn before it is sent never goes out', async () => {
  const backlog = Array.from({ length: 24 }, () => runner.client.invoke(invocation(loop, { orgId: 'org_busy' })));
  const key = 'run_withdrawn:step_1';
  const withdraw = new AbortController();
  const queued = runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 1, payloadJson: '{"n":2}', signal: withdraw.signal }));
  // Time to reach the runner's queue behind the loops (the assertions hold either way: a call cancelled on its way runs nothing either).
  await new Promise((resolve) => setTimeout(resolve, 20));
  withdraw.abort();
  await assert.rejects(queued, (error: unknown) => error instanceof CallWithdrawnError && error.mayHaveRun && error.code === 'call_withdrawn');
  for (const call of backlog) assert.equal((await call).outcome.kind, 'trap');
  const retry = await runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 2, payloadJson: '{"n":2}' }));
  assert.deepEqual([retry.outcome.kind, retry.replayed], ['output', false], 'the withdrawn call recorded nothing');

  const never = runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: 'run_never:step_1', fence: 1, signal: AbortSignal.abort() }));
  await assert.rejects(never, (error: unknown) => error instanceof CallWithdrawnError && !error.mayHaveRun);
  const first = await runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: 'run_never:step_1', fence: 1 }));
  assert.equal(first.replayed, false, 'nothing was sent under the key');
});
