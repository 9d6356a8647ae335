// A recorded Invoke whose caller gave up (its deadline passed) while it waited for a guest slot is
// dropped when its turn comes: nothing runs and nothing is recorded, so under a backlog the slots go
// to calls whose answers are awaited. Through the real runner: one org's endless-loop guests hold
// both slots, and a call queued behind them with a short deadline gives up.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
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
