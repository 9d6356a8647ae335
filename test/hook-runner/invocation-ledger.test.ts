// The invocation ledger on real LMDB in a temp dir, with a counting `execute` so non-execution is
// proven directly: fences per run, replay of completed keys, coalescing, durability across reopen.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { InvocationLedger, type InvocationClaim } from '../../hook-runner/invocation-ledger.ts';
import type { InvocationResult } from '../../hook-runner/invocation-outcome.ts';
import { IdempotencyKeyReusedError, StaleFenceError } from '../../hook-runner/runner-error.ts';
import { openRunnerStore, type RunnerStore } from '../../hook-runner/store.ts';
import { tempDataDir } from '../helpers/hook-runner.ts';

let dataDir: string;
let store: RunnerStore;
let ledger: InvocationLedger;

beforeEach(() => {
  dataDir = tempDataDir();
  store = openRunnerStore(dataDir);
  ledger = new InvocationLedger(store, () => 1_700_000_000_000);
});
afterEach(async () => {
  await store.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const claim = (overrides: Partial<InvocationClaim> = {}): InvocationClaim => ({
  orgId: 'org_a', actionId: 'act', digest: 'd'.repeat(64), idempotencyKey: 'run_1:step_1', runId: 'run_1', fence: 1n, ...overrides,
});

function counter(output = '{"n":1}'): { execute: () => Promise<InvocationResult>; readonly calls: number } {
  let calls = 0;
  return {
    execute: async () => {
      calls += 1;
      return { outcome: { kind: 'output', outputJson: output }, fuelUsed: 42 };
    },
    get calls() { return calls; },
  };
}

describe('invocation ledger', () => {
  it('executes a key once and replays it at the same or a higher fence', async () => {
    const first = counter('{"first":true}');
    assert.deepEqual(await ledger.run(claim(), first.execute), { result: { outcome: { kind: 'output', outputJson: '{"first":true}' }, fuelUsed: 42 }, replayed: false });
    const again = counter('{"second":true}');
    const replay = await ledger.run(claim(), again.execute);
    const higher = await ledger.run(claim({ fence: 5n }), again.execute);
    assert.equal(again.calls, 0);
    assert.equal(first.calls, 1);
    for (const answer of [replay, higher]) {
      assert.equal(answer.replayed, true);
      assert.deepEqual(answer.result.outcome, { kind: 'output', outputJson: '{"first":true}' });
    }
  });

  it('refuses a fence lower than the highest seen for the run, for any step of it', async () => {
    await ledger.run(claim({ fence: 3n }), counter().execute);
    const late = counter();
    await assert.rejects(ledger.run(claim({ idempotencyKey: 'run_1:step_2', fence: 2n }), late.execute), StaleFenceError);
    await assert.rejects(ledger.run(claim({ fence: 1n }), late.execute), /stale fence/);
    assert.equal(late.calls, 0);
    // Other runs and other tenants have their own fences.
    await ledger.run(claim({ idempotencyKey: 'run_2:step_1', runId: 'run_2', fence: 1n }), late.execute);
    await ledger.run(claim({ orgId: 'org_b', fence: 1n }), late.execute);
    assert.equal(late.calls, 2);
    assert.equal(ledger.highestFence('org_a', 'run_1'), 3n);
  });

  it('joins a concurrent execution of the same key instead of running it twice', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let calls = 0;
    const slow = async (): Promise<InvocationResult> => {
      calls += 1;
      await gate;
      return { outcome: { kind: 'output', outputJson: `{"call":${calls}}` }, fuelUsed: 7 };
    };
    const answers = Promise.all([ledger.run(claim(), slow), ledger.run(claim({ fence: 2n }), slow), ledger.run(claim({ fence: 2n }), slow)]);
    // Release the first execution only once the other two have joined it.
    for (let turn = 0; ledger.joinedCount('org_a', 'run_1:step_1') !== 2; turn += 1) {
      assert.ok(turn < 100_000, 'the concurrent callers never joined');
      await new Promise((resolve) => setImmediate(resolve));
    }
    release();
    const settled = await answers;
    assert.equal(calls, 1);
    assert.deepEqual(settled.map((answer) => answer.replayed).sort(), [false, true, true]);
    for (const answer of settled) assert.deepEqual(answer.result.outcome, { kind: 'output', outputJson: '{"call":1}' });
    assert.equal(ledger.highestFence('org_a', 'run_1'), 2n, 'a caller that joined answers only once its own fence is durable');
  });

  it('records no result when execute throws, so the next attempt runs; the fence is kept', async () => {
    await assert.rejects(ledger.run(claim({ fence: 2n }), () => Promise.reject(new Error('host failure'))), /host failure/);
    assert.equal(ledger.highestFence('org_a', 'run_1'), 2n);
    const retry = counter();
    assert.equal((await ledger.run(claim({ fence: 2n }), retry.execute)).replayed, false);
    assert.equal(retry.calls, 1);
    await assert.rejects(ledger.run(claim({ fence: 1n }), retry.execute), StaleFenceError);
  });

  it('refuses a lower fence while a higher one is still executing, before anything is committed', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    const running = ledger.run(claim({ fence: 6n }), async () => {
      await gate;
      return { outcome: { kind: 'output', outputJson: '{}' }, fuelUsed: 1 };
    });
    // The fence is not on disk yet: it commits with the result, in one flushed write.
    assert.equal(ledger.highestFence('org_a', 'run_1'), undefined);
    const late = counter();
    await assert.rejects(ledger.run(claim({ idempotencyKey: 'run_1:step_2', fence: 5n }), late.execute), StaleFenceError);
    release();
    assert.equal((await running).replayed, false);
    assert.equal(ledger.highestFence('org_a', 'run_1'), 6n);
    assert.equal(late.calls, 0);
  });

  it('refuses a completed key reused for another module', async () => {
    await ledger.run(claim(), counter().execute);
    await assert.rejects(ledger.run(claim({ digest: 'e'.repeat(64) }), counter().execute), IdempotencyKeyReusedError);
  });

  it('keeps fences and completed results across a reopen of the store', async () => {
    await ledger.run(claim({ fence: 4n }), counter('{"kept":1}').execute);
    await store.close();
    store = openRunnerStore(dataDir);
    ledger = new InvocationLedger(store, () => 0);
    const after = counter();
    assert.deepEqual((await ledger.run(claim({ fence: 4n }), after.execute)).result.outcome, { kind: 'output', outputJson: '{"kept":1}' });
    await assert.rejects(ledger.run(claim({ idempotencyKey: 'run_1:step_9', fence: 3n }), after.execute), StaleFenceError);
    assert.equal(after.calls, 0);
  });
});
