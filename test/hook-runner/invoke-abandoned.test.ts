// A recorded Invoke whose caller gave up (its deadline passed, or its signal aborted: the run left
// the attempt) while it waited for a guest slot is dropped when its turn comes: nothing runs and
// nothing is recorded, so under a backlog the slots go to calls whose answers are awaited; so is one
// whose retries that joined it all gave up too. Through the real runner: one org's endless-loop
// guests hold both slots, and a call queued behind them gives up.

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

// A retry that joined a queued call keeps it wanted only while the retry itself waits: once every
// caller of the execution gave up before its turn, it is dropped (it ran, and was recorded, while
// the runner counted joiners instead of asking them).
test('a call whose deadline passed, joined by a retry that was then withdrawn, is not run or recorded', async () => {
  const backlog = Array.from({ length: 40 }, () => runner.client.invoke(invocation(loop, { orgId: 'org_busy' })));
  const key = 'run_joined_withdrawn:step_1';
  const impatient = new HookRunnerClient(() => runner.child.address(), runner.token, { deadlinesMs: { invoke: 40 }, attempts: 1 });
  try {
    await assert.rejects(impatient.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 1, payloadJson: '{"n":3}' })));
  } finally {
    impatient.close();
  }
  // The step's retry joins the queued execution; then the run is cancelled and the retry withdrawn.
  const withdraw = new AbortController();
  const retry = runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 2, payloadJson: '{"n":3}', signal: withdraw.signal }));
  await new Promise((resolve) => setTimeout(resolve, 20));
  withdraw.abort();
  await assert.rejects(retry, (error: unknown) => error instanceof CallWithdrawnError && error.mayHaveRun);
  for (const call of backlog) assert.equal((await call).outcome.kind, 'trap');
  const next = await runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 3, payloadJson: '{"n":3}' }));
  assert.deepEqual([next.outcome.kind, next.replayed], ['output', false], 'every caller had gone before its slot came: nothing ran or was recorded');
});

test('a call whose deadline passed, joined by a retry whose deadline passed too, is not run or recorded', async () => {
  const backlog = Array.from({ length: 40 }, () => runner.client.invoke(invocation(loop, { orgId: 'org_busy' })));
  const key = 'run_joined_timed_out:step_1';
  const impatient = new HookRunnerClient(() => runner.child.address(), runner.token, { deadlinesMs: { invoke: 40 }, attempts: 1 });
  try {
    await assert.rejects(impatient.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 1 })));
    await assert.rejects(impatient.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 2 })));
  } finally {
    impatient.close();
  }
  for (const call of backlog) assert.equal((await call).outcome.kind, 'trap');
  const next = await runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 3 }));
  assert.deepEqual([next.outcome.kind, next.replayed], ['output', false], 'both callers had given up before its slot came: nothing ran or was recorded');
});

test('a retry with other inputs does not join a queued call, so it keeps no abandoned call wanted', async () => {
  const backlog = Array.from({ length: 40 }, () => runner.client.invoke(invocation(loop, { orgId: 'org_busy' })));
  const key = 'run_other_inputs:step_1';
  const impatient = new HookRunnerClient(() => runner.child.address(), runner.token, { deadlinesMs: { invoke: 40 }, attempts: 1 });
  try {
    await assert.rejects(impatient.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 1 })));
  } finally {
    impatient.close();
  }
  // Edited permissions: other inputs, so the retry waits for the queued call to end instead of joining it; then it is withdrawn.
  const withdraw = new AbortController();
  const retry = runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 2, permissions: ['net:example.com'], signal: withdraw.signal }));
  await new Promise((resolve) => setTimeout(resolve, 20));
  withdraw.abort();
  await assert.rejects(retry, (error: unknown) => error instanceof CallWithdrawnError);
  for (const call of backlog) assert.equal((await call).outcome.kind, 'trap');
  const next = await runner.client.invoke(invocation(echo, { orgId: 'org_busy', idempotencyKey: key, fence: 3 }));
  assert.deepEqual([next.outcome.kind, next.replayed], ['output', false], 'the first call ran for a retry that had not joined it');
});
