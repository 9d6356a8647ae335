// The invocation ledger on real LMDB in a temp dir, with a counting `execute` so non-execution is
// proven directly: fences per run, replay of completed keys, coalescing, durability across reopen,
// and nothing stored or run for an org forgotten meanwhile.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { InvocationLedger, type InvocationClaim } from '../../hook-runner/invocation-ledger.ts';
import type { InvocationResult } from '../../hook-runner/invocation-outcome.ts';
import { IdempotencyKeyReusedError, InvokeAbandonedError, OrganizationForgottenError, StaleFenceError } from '../../hook-runner/runner-error.ts';
import { ForgottenOrgs } from '../../hook-runner/forgotten-orgs.ts';
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
  orgId: 'org_a', actionId: 'act', digest: 'd'.repeat(64), inputs: 'i1', idempotencyKey: 'run_1:step_1', runId: 'run_1', fence: 1n, ...overrides,
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
  it('a caller that joins an execution its own caller abandoned runs the key itself instead of inheriting the drop', async () => {
    let retry: Promise<unknown> | undefined;
    const second = counter('{"ran":"for the retry"}');
    // The first caller gave up: its execution is dropped when its slot comes (handlers.ts). The
    // retry arrives while that drop's fence is being committed, and joins it.
    const first = ledger.run(claim(), async () => {
      setImmediate(() => (retry = ledger.run(claim({ fence: 2n }), second.execute)));
      throw new InvokeAbandonedError();
    });
    await assert.rejects(first, InvokeAbandonedError);
    while (retry === undefined) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(await retry, { result: { outcome: { kind: 'output', outputJson: '{"ran":"for the retry"}' }, fuelUsed: 42 }, replayed: false });
    assert.equal(second.calls, 1);
  });

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

  it('tells an execution it is wanted while any of its callers still waits: the one that started it or one that joined it with the same module and inputs', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let wanted: () => boolean = () => true;
    const gone = { first: false, joined: false };
    const running = ledger.run(claim(), async (isWanted) => {
      wanted = isWanted;
      await gate;
      return { outcome: { kind: 'output', outputJson: '{}' }, fuelUsed: 1 };
    }, () => gone.first);
    const joined = ledger.run(claim({ fence: 2n }), counter().execute, () => gone.joined);
    // Other inputs do not join: this caller's wait keeps nobody else's execution wanted.
    const other = ledger.run(claim({ inputs: 'i2', fence: 3n }), counter().execute, () => false);
    assert.equal(ledger.joinedCount('org_a', 'run_1:step_1'), 1);
    gone.first = true;
    assert.equal(wanted(), true, 'the caller that joined still waits');
    gone.joined = true;
    assert.equal(wanted(), false, 'every caller of the execution has gone');
    release();
    await Promise.all([running, joined, other]);
  });

  it('records no result when execute throws, so the next attempt runs; the fence is kept', async () => {
    await assert.rejects(ledger.run(claim({ fence: 2n }), () => Promise.reject(new Error('host failure'))), /host failure/);
    assert.equal(ledger.highestFence('org_a', 'run_1'), 2n);
    const retry = counter();
    assert.equal((await ledger.run(claim({ fence: 2n }), retry.execute)).replayed, false);
    assert.equal(retry.calls, 1);
    await assert.rejects(ledger.run(claim({ fence: 1n }), retry.execute), StaleFenceError);
  });

  it('a caller that joined an execution which then throws gets the error with its own fence durable', async () => {
    let fail: ((error: Error) => void) | undefined;
    const first = ledger.run(claim({ fence: 2n }), () => new Promise<InvocationResult>((_, reject) => (fail = reject)));
    while (fail === undefined) await new Promise((resolve) => setImmediate(resolve));
    fail(new Error('host failure'));
    // The first call is now committing its own fence (2); a caller with fence 3 joins in that window.
    await new Promise((resolve) => setImmediate(resolve));
    const joined = ledger.run(claim({ fence: 3n }), counter().execute);
    await assert.rejects(first, /host failure/);
    await assert.rejects(joined, /host failure/);
    assert.equal(ledger.highestFence('org_a', 'run_1'), 3n, 'every answered call\'s fence is durable');
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

  it('stores no trap or rejection as the result of a key: the next attempt runs again, and the fence is kept', async () => {
    for (const outcome of [
      { kind: 'trap', trap: 'unreachable', message: 'wasm trap: unreachable' },
      { kind: 'rejected', reason: 'rejected' },
    ] as const) {
      const idempotencyKey = `run_1:${outcome.kind}`;
      let calls = 0;
      const failing = async (): Promise<InvocationResult> => {
        calls += 1;
        return { outcome, fuelUsed: 3 };
      };
      assert.deepEqual(await ledger.run(claim({ idempotencyKey, fence: 2n }), failing), { result: { outcome, fuelUsed: 3 }, replayed: false });
      assert.equal(ledger.highestFence('org_a', 'run_1'), 2n, 'the fence of an answered trap is durable');
      assert.equal(store.invocations.get(['org_a', idempotencyKey]), undefined);
      assert.equal((await ledger.run(claim({ idempotencyKey, fence: 2n }), failing)).replayed, false);
      assert.equal(calls, 2);
      await assert.rejects(ledger.run(claim({ idempotencyKey, fence: 1n }), failing), StaleFenceError);
    }
  });

  it('resumes a trapped key with a new module digest: it executes, and its output completes the key', async () => {
    const trap = async (): Promise<InvocationResult> => ({ outcome: { kind: 'trap', trap: 'unreachable', message: 'trap' }, fuelUsed: 1 });
    await ledger.run(claim({ fence: 1n }), trap);
    const fixed = counter('{"fixed":true}');
    const resumed = await ledger.run(claim({ digest: 'e'.repeat(64), fence: 2n }), fixed.execute);
    assert.deepEqual(resumed, { result: { outcome: { kind: 'output', outputJson: '{"fixed":true}' }, fuelUsed: 42 }, replayed: false });
    const again = counter();
    assert.equal((await ledger.run(claim({ digest: 'e'.repeat(64), fence: 3n }), again.execute)).replayed, true);
    assert.equal(again.calls, 0);
  });

  it('ignores a trap stored by an earlier release: the key runs again', async () => {
    await store.durable(store.invocations.put(['org_a', 'run_1:step_1'], {
      actionId: 'act', digest: 'd'.repeat(64), fence: '1', outcome: { kind: 'trap', trap: 'unreachable', message: 'old' }, fuelUsed: 1, completedAtMs: 0,
    }));
    const fixed = counter('{"fixed":true}');
    const answer = await ledger.run(claim({ digest: 'e'.repeat(64), fence: 2n }), fixed.execute);
    assert.deepEqual(answer.result.outcome, { kind: 'output', outputJson: '{"fixed":true}' });
    assert.equal(answer.replayed, false);
    assert.equal(fixed.calls, 1);
  });

  it('executes a completed key called with a new module digest, and its output replaces the stored one', async () => {
    await ledger.run(claim({ fence: 1n }), counter('{"v":1}').execute);
    const newer = counter('{"v":2}');
    const v2 = { outcome: { kind: 'output', outputJson: '{"v":2}' }, fuelUsed: 42 };
    assert.deepEqual(await ledger.run(claim({ digest: 'e'.repeat(64), fence: 2n }), newer.execute), { result: v2, replayed: false });
    assert.equal(newer.calls, 1);
    assert.deepEqual(await ledger.run(claim({ digest: 'e'.repeat(64), fence: 3n }), newer.execute), { result: v2, replayed: true });
    assert.equal(newer.calls, 1);
    assert.equal(ledger.highestFence('org_a', 'run_1'), 3n);
  });

  it('executes a completed key again when the same module is given other inputs (permissions, a secret written since); a record without inputs matches on its digest', async () => {
    await ledger.run(claim({ fence: 1n }), counter('{"broken":true}').execute);
    const fixed = counter('{"fixed":true}');
    const answer = await ledger.run(claim({ inputs: 'i2', fence: 2n }), fixed.execute);
    assert.deepEqual([answer.result.outcome, answer.replayed, fixed.calls], [{ kind: 'output', outputJson: '{"fixed":true}' }, false, 1]);
    assert.equal((await ledger.run(claim({ inputs: 'i2', fence: 3n }), fixed.execute)).replayed, true, 'then it replays under the new inputs');
    assert.equal(store.invocations.get(['org_a', 'run_1:step_1'])?.inputs, 'i2');
    await store.durable(store.invocations.put(['org_a', 'run_1:step_2'], {
      actionId: 'act', digest: 'd'.repeat(64), fence: '1', outcome: { kind: 'output', outputJson: '{"old":true}' }, fuelUsed: 1, completedAtMs: 0,
    }));
    const untouched = counter();
    const old = await ledger.run(claim({ idempotencyKey: 'run_1:step_2', inputs: 'i9', fence: 4n }), untouched.execute);
    assert.deepEqual([old.replayed, untouched.calls], [true, 0]);
  });

  it('a caller with a new module digest that joined an execution runs its own module once that one ends, however it ends', async () => {
    const endings: Array<{ readonly name: string; readonly settle: () => Promise<InvocationResult> }> = [
      { name: 'output', settle: async () => ({ outcome: { kind: 'output', outputJson: '{"v":1}' }, fuelUsed: 5 }) },
      { name: 'trap', settle: async () => ({ outcome: { kind: 'trap', trap: 'unreachable', message: 'trap' }, fuelUsed: 5 }) },
      { name: 'error', settle: async () => { throw new Error('the sandbox failed'); } },
    ];
    for (const ending of endings) {
      const runId = `run_${ending.name}`;
      const idempotencyKey = `${runId}:step_1`;
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => { release = resolve; });
      const running = ledger.run(claim({ idempotencyKey, runId, fence: 1n }), async () => {
        await gate;
        return ending.settle();
      });
      const fixed = counter('{"v":2}');
      const joined = ledger.run(claim({ idempotencyKey, runId, digest: 'e'.repeat(64), fence: 2n }), fixed.execute);
      assert.equal(ledger.joinedCount('org_a', idempotencyKey), 0, 'it waits without joining');
      release();
      await running.catch(() => undefined);
      const answer = await joined;
      assert.equal(fixed.calls, 1, ending.name);
      assert.deepEqual(answer, { result: { outcome: { kind: 'output', outputJson: '{"v":2}' }, fuelUsed: 42 }, replayed: false }, ending.name);
    }
  });

  it('a caller with the same module digest that joined a trapping execution gets the trap', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    const trap = { kind: 'trap', trap: 'unreachable', message: 'trap' } as const;
    const running = ledger.run(claim(), async () => {
      await gate;
      return { outcome: trap, fuelUsed: 5 };
    });
    const again = counter();
    const joined = ledger.run(claim({ fence: 2n }), again.execute);
    release();
    await running;
    assert.deepEqual(await joined, { result: { outcome: trap, fuelUsed: 5 }, replayed: true });
    assert.equal(again.calls, 0);
  });

  it('refuses a key reused for another action, completed or executing', async () => {
    await ledger.run(claim(), counter().execute);
    const other = counter();
    await assert.rejects(ledger.run(claim({ actionId: 'other' }), other.execute), IdempotencyKeyReusedError);
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    const running = ledger.run(claim({ idempotencyKey: 'run_1:step_2' }), async () => {
      await gate;
      return { outcome: { kind: 'output', outputJson: '{}' }, fuelUsed: 1 };
    });
    await assert.rejects(ledger.run(claim({ idempotencyKey: 'run_1:step_2', actionId: 'other' }), other.execute), IdempotencyKeyReusedError);
    release();
    await running;
    assert.equal(other.calls, 0);
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

  it('an org forgotten while its call runs: the call and a caller that joined it are answered, nothing is stored, and every later call is refused', async () => {
    const forgotten = new ForgottenOrgs(store);
    ledger = new InvocationLedger(store, () => 1_700_000_000_000, (orgId) => forgotten.has(orgId));
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const running = ledger.run(claim({ fence: 3n }), async () => {
      await gate;
      return { outcome: { kind: 'output', outputJson: '{"late":1}' }, fuelUsed: 1 };
    });
    // A retry joins the execution; the org is then forgotten (its removal done) before the guest ends.
    const joined = ledger.run(claim({ fence: 3n }), counter().execute);
    assert.equal(ledger.joinedCount('org_a', 'run_1:step_1'), 1);
    await forgotten.forget('org_a', 1);
    release();
    assert.deepEqual((await running).result.outcome, { kind: 'output', outputJson: '{"late":1}' });
    assert.deepEqual((await joined).result.outcome, { kind: 'output', outputJson: '{"late":1}' });
    assert.equal(store.invocations.get(['org_a', 'run_1:step_1']), undefined, 'no record of the call');
    assert.equal(store.fences.get(['org_a', 'run_1']), undefined, 'no fence');
    assert.equal([...store.fencesByTime.getKeys({})].length + [...store.invocationsByTime.getKeys({})].length, 0);
    const later = counter();
    await assert.rejects(ledger.run(claim({ fence: 4n }), later.execute), OrganizationForgottenError);
    assert.equal(later.calls, 0);
  });

  it('an org forgotten before its guest\'s turn: the guest is dropped unrun, and the caller told why', async () => {
    let forgotten = false;
    ledger = new InvocationLedger(store, () => 1, () => forgotten);
    let release = (): void => undefined;
    const turn = new Promise<void>((resolve) => (release = resolve));
    let ran = false;
    const running = ledger.run(claim(), async (wanted) => {
      await turn;
      if (!wanted()) throw new InvokeAbandonedError();
      ran = true;
      return { outcome: { kind: 'output', outputJson: '{}' }, fuelUsed: 1 };
    });
    forgotten = true;
    release();
    await assert.rejects(running, OrganizationForgottenError);
    assert.equal(ran, false);
  });

  it('a call committed just before its org is forgotten is removed with the rest', async () => {
    const forgotten = new ForgottenOrgs(store);
    let removal: Promise<number> | undefined;
    // Forgotten the moment the call's write is queued, before it is durable.
    const racing: typeof store = Object.create(store, {
      durable: { value: <T>(write: Promise<T>): Promise<T> => ((removal ??= forgotten.forget('org_a', 1)), store.durable(write)) },
    });
    ledger = new InvocationLedger(racing, () => 1_700_000_000_000, (orgId) => forgotten.has(orgId));
    assert.deepEqual((await ledger.run(claim({ fence: 2n }), counter('{"just":"in time"}').execute)).result.outcome, { kind: 'output', outputJson: '{"just":"in time"}' });
    // Its fence and record, and their two time entries.
    assert.equal(await removal, 4);
    assert.equal(store.invocations.get(['org_a', 'run_1:step_1']), undefined);
    assert.equal(store.fences.get(['org_a', 'run_1']), undefined);
  });
});
