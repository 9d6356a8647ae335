// Fences and idempotency through the real runner: stale fences are refused, a completed key replays
// its stored output to the same module without executing (proven with an echo guest fed a different
// payload), a newly approved module runs, a trapped key runs again (so a fixed version can resume
// it), and concurrent calls with one key execute once.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ConflictError } from '../../runtime/errors.ts';
import type { InvokeResult } from '../../runtime/hook-runner/client.ts';
import { invocation, parseOutput, type RunnerFixture, startRunnerWithEcho } from '../helpers/hook-runner.ts';
import { assembleWat, constantWat, HOSTILE_WAT, REJECT_WAT } from '../helpers/hook-runner-wat.ts';

let runner: RunnerFixture;
let echo: string;

before(async () => ({ runner, echo } = await startRunnerWithEcho()));
after(() => runner.close());

const payloadOf = (result: InvokeResult): unknown => {
  assert.equal(result.outcome.kind, 'output');
  return result.outcome.kind === 'output' ? parseOutput(result.outcome.outputJson)['payload'] : undefined;
};

const isStaleFence = (error: unknown): boolean => {
  assert.ok(error instanceof ConflictError, `expected ConflictError, got ${String(error)}`);
  assert.equal(error.code, 'stale_fence');
  assert.equal(error.status, 409);
  assert.match(error.message, /stale fence/);
  return true;
};

describe('fences', () => {
  it('refuses a fence lower than the highest seen for the run', async () => {
    await runner.client.invoke(invocation(echo, { idempotencyKey: 'run_f1:step_1', fence: 7 }));
    await assert.rejects(runner.client.invoke(invocation(echo, { idempotencyKey: 'run_f1:step_2', fence: 6 })), isStaleFence);
    await assert.rejects(runner.client.invoke(invocation(echo, { idempotencyKey: 'run_f1:step_1', fence: 1 })), isStaleFence);
    // The same fence and higher ones pass; the run id is everything before the last ':'.
    await runner.client.invoke(invocation(echo, { idempotencyKey: 'run_f1:step_2', fence: 7 }));
    await runner.client.invoke(invocation(echo, { idempotencyKey: 'run_f1:x:step_3', fence: 1 }));
  });

  it('handles fences beyond 2^53 exactly', async () => {
    const big = 2n ** 63n + 1n;
    await runner.client.invoke(invocation(echo, { idempotencyKey: 'run_big:step_1', fence: big }));
    await assert.rejects(runner.client.invoke(invocation(echo, { idempotencyKey: 'run_big:step_2', fence: big - 1n })), isStaleFence);
  });
});

describe('idempotency', () => {
  it('replays a completed key without executing it again', async () => {
    const key = 'run_i1:step_1';
    const first = await runner.client.invoke(invocation(echo, { idempotencyKey: key, payloadJson: '{"attempt":1}' }));
    assert.equal(first.replayed, false);
    assert.deepEqual(payloadOf(first), { attempt: 1 });
    // Had the guest run again it would echo attempt 2; the stored reply still says attempt 1.
    for (const fence of [1, 2]) {
      const again = await runner.client.invoke(invocation(echo, { idempotencyKey: key, payloadJson: '{"attempt":2}', fence }));
      assert.equal(again.replayed, true);
      assert.deepEqual(payloadOf(again), { attempt: 1 });
      assert.equal(again.fuelUsed, first.fuelUsed);
    }
  });

  it('stores no trap or rejection: the key runs again, with the same answer, and its fence holds', async () => {
    const trap = await runner.client.compile(await assembleWat('unreachable', HOSTILE_WAT.unreachable));
    const reject = await runner.client.compile(await assembleWat('reject', REJECT_WAT));
    for (const [run, digest, kind] of [['run_i2', trap, 'trap'], ['run_i2r', reject, 'rejected']] as const) {
      const first = await runner.client.invoke(invocation(digest, { idempotencyKey: `${run}:step_1`, fence: 3 }));
      assert.equal(first.outcome.kind, kind);
      assert.equal(first.replayed, false);
      const again = await runner.client.invoke(invocation(digest, { idempotencyKey: `${run}:step_1`, fence: 3 }));
      assert.deepEqual(again, first, 'executed again (replayed: false), deterministically');
      await assert.rejects(runner.client.invoke(invocation(echo, { idempotencyKey: `${run}:step_2`, fence: 2 })), isStaleFence);
    }
  });

  it('resumes a trapped key with a fixed module: it executes, and its output completes the key', async () => {
    const trap = await runner.client.compile(await assembleWat('unreachable', HOSTILE_WAT.unreachable));
    const key = 'run_i5:step_1';
    assert.equal((await runner.client.invoke(invocation(trap, { idempotencyKey: key, fence: 1 }))).outcome.kind, 'trap');
    const fixed = await runner.client.invoke(invocation(echo, { idempotencyKey: key, fence: 2, payloadJson: '{"resumed":1}' }));
    assert.equal(fixed.replayed, false);
    assert.deepEqual(payloadOf(fixed), { resumed: 1 });
    // Completed now: the same module gets the stored output.
    const again = await runner.client.invoke(invocation(echo, { idempotencyKey: key, fence: 3, payloadJson: '{"resumed":2}' }));
    assert.equal(again.replayed, true);
    assert.deepEqual(payloadOf(again), { resumed: 1 });
  });

  it('runs a completed key again when its module is given other permissions or a secret written since, then replays that', async () => {
    const scope = { orgId: 'org_inputs', actionId: 'act_inputs' };
    const key = 'run_i6:step_1';
    await runner.client.putSecret({ ...scope, key: 'FIX', value: 'first-value-123' });
    const call = (fence: number, permissions: string[]) => runner.client.invoke(invocation(echo, { ...scope, idempotencyKey: key, fence, permissions, payloadJson: JSON.stringify({ fence }) }));
    assert.equal((await call(1, [])).replayed, false);
    assert.equal((await call(2, [])).replayed, true, 'the same inputs: replayed');
    const newPermission = await call(3, ['read_secret:FIX']);
    assert.deepEqual([newPermission.replayed, payloadOf(newPermission)], [false, { fence: 3 }], 'another permission: the guest ran again');
    assert.equal((await call(4, ['read_secret:FIX'])).replayed, true);
    await runner.client.putSecret({ ...scope, key: 'FIX', value: 'second-value-456' });
    const newSecret = await call(5, ['read_secret:FIX']);
    assert.deepEqual([newSecret.replayed, payloadOf(newSecret)], [false, { fence: 5 }], 'a secret written since: the guest ran again');
    assert.equal((await call(6, ['read_secret:FIX'])).replayed, true);
  });

  it('executes concurrent calls with one key once', async () => {
    const key = 'run_i3:step_1';
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, attempt) => runner.client.invoke(invocation(echo, { idempotencyKey: key, payloadJson: JSON.stringify({ attempt }) }))),
    );
    assert.equal(results.filter((result) => !result.replayed).length, 1);
    const payloads = new Set(results.map((result) => JSON.stringify(payloadOf(result))));
    assert.equal(payloads.size, 1, `every caller sees the single execution's output, got ${[...payloads].join(' ')}`);
  });

  it('runs a newly approved module for a completed key the runtime asks about again, then replays that output', async () => {
    const newer = await runner.client.compile(await assembleWat('newer', constantWat('{"version":2}')));
    const key = 'run_i6:step_1';
    const first = await runner.client.invoke(invocation(echo, { idempotencyKey: key, fence: 1, payloadJson: '{"v":1}' }));
    assert.equal(first.replayed, false);
    // The runtime never committed this answer (deadline, crash, or an output it refused), so nothing
    // of it was applied; a new version was approved before the retry.
    const retried = await runner.client.invoke(invocation(newer, { idempotencyKey: key, fence: 2, payloadJson: '{"v":1}' }));
    assert.equal(retried.replayed, false);
    assert.deepEqual(retried.outcome, { kind: 'output', outputJson: '{"version":2}' });
    const again = await runner.client.invoke(invocation(newer, { idempotencyKey: key, fence: 3, payloadJson: '{"v":1}' }));
    assert.deepEqual(again, { ...retried, replayed: true });
  });

  it('refuses a completed key reused for another action', async () => {
    await runner.client.invoke(invocation(echo, { idempotencyKey: 'run_i4:step_1' }));
    await assert.rejects(runner.client.invoke(invocation(echo, { idempotencyKey: 'run_i4:step_1', actionId: 'act_other' })), (error: unknown) => {
      assert.ok(error instanceof ConflictError);
      assert.equal(error.code, 'idempotency_key_reused');
      return true;
    });
  });
});
