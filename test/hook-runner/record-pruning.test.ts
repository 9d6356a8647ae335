// Pruning the runner's old records on real LMDB with an injected clock: completed invocations and
// fences past the retention go, newer ones and raised fences stay, and a pruned key runs again.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { InvocationLedger, type InvocationClaim } from '../../hook-runner/invocation-ledger.ts';
import type { InvocationResult } from '../../hook-runner/invocation-outcome.ts';
import { pruneRunnerRecords, RECORD_RETENTION_MS } from '../../hook-runner/record-pruning.ts';
import { openRunnerStore, type RunnerStore } from '../../hook-runner/store.ts';
import { tempDataDir } from '../helpers/hook-runner.ts';

const DAY = 24 * 60 * 60 * 1000;
let dataDir: string;
let store: RunnerStore;
let now = 0;
let ledger: InvocationLedger;

beforeEach(() => {
  dataDir = tempDataDir();
  store = openRunnerStore(dataDir);
  now = Date.UTC(2026, 0, 1);
  ledger = new InvocationLedger(store, () => now);
});
afterEach(async () => {
  await store.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const claim = (runId: string, step: string, fence: bigint): InvocationClaim => ({
  orgId: 'org_a', actionId: 'act', digest: 'd'.repeat(64), inputs: 'i1', idempotencyKey: `${runId}:${step}`, runId, fence,
});
let executions = 0;
const execute = async (): Promise<InvocationResult> => {
  executions += 1;
  return { outcome: { kind: 'output', outputJson: '{}' }, fuelUsed: 1 };
};

describe('runner record pruning', () => {
  it('removes invocations and fences past the retention and keeps newer ones', async () => {
    const start = now;
    await ledger.run(claim('run_old', 's', 1n), execute);
    now = start + 20 * DAY;
    await ledger.run(claim('run_new', 's', 1n), execute);

    assert.deepEqual(await pruneRunnerRecords(store, start + RECORD_RETENTION_MS), { invocations: 0, fences: 0 }, 'nothing is old enough yet');
    assert.deepEqual(await pruneRunnerRecords(store, start + RECORD_RETENTION_MS + 1), { invocations: 1, fences: 1 });
    assert.equal(store.invocations.get(['org_a', 'run_old:s']), undefined);
    assert.equal(ledger.highestFence('org_a', 'run_old'), undefined);
    assert.notEqual(store.invocations.get(['org_a', 'run_new:s']), undefined);
    assert.equal(ledger.highestFence('org_a', 'run_new'), 1n);
    assert.deepEqual(await pruneRunnerRecords(store, start + RECORD_RETENTION_MS + 1), { invocations: 0, fences: 0 }, 'a second pass finds nothing');
  });

  it('keeps a fence raised since its old entry, and runs a pruned key again when retried', async () => {
    const start = now;
    await ledger.run(claim('run_1', 'a', 1n), execute);
    now = start + 29 * DAY;
    await ledger.run(claim('run_1', 'b', 2n), execute);
    now = start + RECORD_RETENTION_MS + 1;
    assert.deepEqual(await pruneRunnerRecords(store, now), { invocations: 1, fences: 0 });
    assert.equal(ledger.highestFence('org_a', 'run_1'), 2n, 'the raised fence stays');
    await assert.rejects(ledger.run(claim('run_1', 'c', 1n), execute), /stale fence/);

    const before = executions;
    const again = await ledger.run(claim('run_1', 'a', 2n), execute);
    assert.equal(again.replayed, false, 'the pruned key executed again');
    assert.equal(executions, before + 1);
  });

  it('prunes everything old in bounded passes, oldest first, and keeps what is newer', async () => {
    const start = now;
    for (let i = 0; i < 6; i += 1) {
      now = start + i;
      await ledger.run(claim(`run_${i}`, 's', 1n), execute);
    }
    const transaction = store.fences.transaction.bind(store.fences);
    let passes = 0;
    store.fences.transaction = ((body: () => unknown) => {
      passes += 1;
      return transaction(body);
    }) as typeof store.fences.transaction;
    try {
      // Old enough: run_0 .. run_4; run_5 was written 5 ms later and stays.
      assert.deepEqual(await pruneRunnerRecords(store, start + RECORD_RETENTION_MS + 5, RECORD_RETENTION_MS, 2), { invocations: 5, fences: 5 }, 'one call removes the whole backlog');
    } finally {
      store.fences.transaction = transaction;
    }
    assert.equal(passes, 3, 'in passes of at most 2: 2 + 2 + 1');
    assert.equal(store.invocations.get(['org_a', 'run_4:s']), undefined);
    assert.notEqual(store.invocations.get(['org_a', 'run_5:s']), undefined);
  });

  it('a prune told to stop (the runner is closing) ends after the pass in progress; the next goes on', async () => {
    const start = now + 1000;
    for (let i = 0; i < 3; i += 1) {
      now = start + i;
      await ledger.run(claim(`stop_${i}`, 's', 1n), execute);
    }
    const stopped = new AbortController();
    stopped.abort();
    const cutoffNow = start + RECORD_RETENTION_MS + 3;
    assert.deepEqual(await pruneRunnerRecords(store, cutoffNow, RECORD_RETENTION_MS, 2, stopped.signal), { invocations: 2, fences: 2 }, 'one pass of 2');
    assert.notEqual(store.invocations.get(['org_a', 'stop_2:s']), undefined, 'the newest old one is left');
    await pruneRunnerRecords(store, cutoffNow, RECORD_RETENTION_MS, 2);
    assert.equal(store.invocations.get(['org_a', 'stop_2:s']), undefined);
  });
});
