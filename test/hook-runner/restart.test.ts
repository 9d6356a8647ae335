// A runner restarted on the same data dir (clean stop, and SIGKILL) keeps modules (recompiled
// lazily from LMDB), secrets, fences and completed replies.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ConflictError } from '../../runtime/errors.ts';
import { invocation, startRunner, waitFor, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat, fromHexEcho, HEX_ECHO_WAT } from '../helpers/hook-runner-wat.ts';

let runner: RunnerFixture;
let echo: string;
const scope = { orgId: 'org_restart', actionId: 'act_restart' };

before(async () => {
  runner = await startRunner();
  // Hex-encoding: the secrets it was given come back as given (a plain echo's output has them masked).
  echo = await runner.client.compile(await assembleWat('hex-echo', HEX_ECHO_WAT));
});
after(() => runner.close());

async function recordState(run: string): Promise<string> {
  await runner.client.putSecret({ ...scope, key: `KEY_${run.toUpperCase()}`, value: `value-${run}` });
  const first = await runner.client.invoke(invocation(echo, { ...scope, idempotencyKey: `${run}:step_1`, fence: 5, payloadJson: '{"before":true}' }));
  assert.equal(first.replayed, false);
  return first.outcome.kind === 'output' ? first.outcome.outputJson : '';
}

async function assertStateKept(run: string, storedOutput: string): Promise<void> {
  // Module: known by digest without a new Compile, recompiled lazily; secret injected.
  const fresh = await runner.client.invoke(invocation(echo, { ...scope, idempotencyKey: `${run}:step_2`, fence: 5, permissions: [`read_secret:KEY_${run.toUpperCase()}`] }));
  assert.equal(fresh.outcome.kind, 'output');
  if (fresh.outcome.kind === 'output') assert.deepEqual(fromHexEcho(fresh.outcome.outputJson)['secrets'], { [`KEY_${run.toUpperCase()}`]: `value-${run}` });
  // Completed reply: replayed byte for byte.
  const replay = await runner.client.invoke(invocation(echo, { ...scope, idempotencyKey: `${run}:step_1`, fence: 5, payloadJson: '{"before":false}' }));
  assert.equal(replay.replayed, true);
  assert.deepEqual(replay.outcome, { kind: 'output', outputJson: storedOutput });
  // Fence: still refused below 5.
  await assert.rejects(
    runner.client.invoke(invocation(echo, { ...scope, idempotencyKey: `${run}:step_3`, fence: 4 })),
    (error: unknown) => error instanceof ConflictError && error.code === 'stale_fence',
  );
  assert.ok((await runner.client.listSecretKeys(scope)).includes(`KEY_${run.toUpperCase()}`));
}

describe('restart on the same data dir', () => {
  it('keeps everything across a clean restart', async () => {
    const stored = await recordState('run_clean');
    const pid = runner.child.pid;
    await runner.restart();
    assert.notEqual(runner.child.pid, pid);
    await assertStateKept('run_clean', stored);
  });

  it('keeps everything a reply was given for across SIGKILL', async () => {
    const stored = await recordState('run_killed');
    const before = runner.child.restarts;
    const pid = runner.child.pid;
    process.kill(pid ?? 0, 'SIGKILL');
    await waitFor(() => runner.child.restarts > before && runner.child.state === 'running', 'the supervisor to restart the runner');
    assert.notEqual(runner.child.pid, pid);
    await assertStateKept('run_killed', stored);
  });
});
