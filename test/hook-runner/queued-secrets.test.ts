// A call's secrets are read when its guest's slot comes, not when the call arrived: one that waited
// behind other calls while its secret was replaced gets the new value, and one whose secret was
// deleted meanwhile gets none (each write answered before the guest ran). The record names the
// secrets the guest got: a retry under them is answered from it. (A stale-read review found queued
// guests given values that had been deleted or replaced seconds before they ran.) Through the real
// runner: one org's endless-loop guests hold both slots while the call waits.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ConflictError } from '../../runtime/errors.ts';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { invocation, startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat, fromHexEcho, HEX_ECHO_WAT, HOSTILE_WAT } from '../helpers/hook-runner-wat.ts';

const ORG = 'org_queued';
let runner: RunnerFixture;
let echo: string;
let loop: string;

before(async () => {
  runner = await startRunner();
  // Hex-encoding: the secrets it was given come back as given (a plain echo's output has them masked).
  echo = await runner.client.compile(await assembleWat('hex-echo', HEX_ECHO_WAT));
  loop = await runner.client.compile(await assembleWat('loop', HOSTILE_WAT.loop));
});
after(() => runner.close());

/** Settles with the call, and says whether it has settled yet. */
const watched = <T>(call: Promise<T>) => {
  let settled = false;
  const done = call.finally(() => (settled = true));
  return { done, settled: () => settled };
};

/**
 * Resolves once the runner has taken in the call of `runId` under fence 2: a fence-1 call of the run
 * is refused as stale from then on (each probe gives up after 40 ms, and is dropped unrun if it queued).
 */
async function takenIn(runId: string): Promise<void> {
  for (let i = 0; i < 250; i++) {
    const probe = new HookRunnerClient(() => runner.child.address(), runner.token, { deadlinesMs: { invoke: 40 }, attempts: 1 });
    try {
      await probe.invoke(invocation(echo, { orgId: ORG, idempotencyKey: `${runId}:probe_${i}`, fence: 1 }));
    } catch (error) {
      if (error instanceof ConflictError && error.code === 'stale_fence') return;
    } finally {
      probe.close();
    }
  }
  assert.fail(`the call of ${runId} never reached the runner`);
}

/** Runs `change` while a call reading API_TOKEN waits behind a backlog of endless loops; the secrets its guest got. */
async function secretsGivenAfter(actionId: string, runId: string, change: () => Promise<unknown>): Promise<Record<string, string>> {
  const backlog = Array.from({ length: 24 }, () => runner.client.invoke(invocation(loop, { orgId: ORG })));
  const queued = watched(runner.client.invoke(invocation(echo, { orgId: ORG, actionId, idempotencyKey: `${runId}:step_1`, fence: 2, permissions: ['read_secret:API_TOKEN'] })));
  await takenIn(runId);
  await change();
  assert.equal(queued.settled(), false, 'the change was answered while the call still waited');
  const answer = await queued.done;
  for (const call of backlog) assert.equal((await call).outcome.kind, 'trap');
  assert.equal(answer.replayed, false);
  assert.ok(answer.outcome.kind === 'output', JSON.stringify(answer.outcome));
  return fromHexEcho(answer.outcome.outputJson).secrets as Record<string, string>;
}

test('a secret replaced while the call waited for its slot reaches the guest as replaced; a retry under it is answered from the record', async () => {
  const scope = { orgId: ORG, actionId: 'act_replaced' };
  await runner.client.putSecret({ ...scope, key: 'API_TOKEN', value: 'old-token-1111' });
  const given = await secretsGivenAfter(scope.actionId, 'run_replaced', () => runner.client.putSecret({ ...scope, key: 'API_TOKEN', value: 'new-token-2222' }));
  assert.deepEqual(given, { API_TOKEN: 'new-token-2222' });

  // The record holds the secrets' revision the guest ran with, which is the one a retry now carries.
  const retry = await runner.client.invoke(invocation(echo, { orgId: ORG, actionId: scope.actionId, idempotencyKey: 'run_replaced:step_1', fence: 3, permissions: ['read_secret:API_TOKEN'] }));
  assert.equal(retry.replayed, true);
});

test('a secret deleted while the call waited for its slot does not reach the guest', async () => {
  const scope = { orgId: ORG, actionId: 'act_deleted' };
  await runner.client.putSecret({ ...scope, key: 'API_TOKEN', value: 'gone-token-3333' });
  const given = await secretsGivenAfter(scope.actionId, 'run_deleted', async () => assert.equal(await runner.client.deleteSecret({ ...scope, key: 'API_TOKEN' }), true));
  assert.deepEqual(given, {});
});
