// When the runner prunes its call ledger (pruning-schedule.ts), on real LMDB with injected wall
// and monotonic clocks and mocked interval timers: a wall clock stepped 31 days forward while the
// runner runs prunes nothing that real time has not aged (it pruned every record, minutes old, at
// the next pass); a clock set back is followed at once. Failures and the stop: prune-failing.test.ts.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { mock, test } from 'node:test';
import { InvocationLedger } from '../../hook-runner/invocation-ledger.ts';
import { RecordPruning } from '../../hook-runner/pruning-schedule.ts';
import { PRUNE_INTERVAL_MS } from '../../hook-runner/record-pruning.ts';
import { openRunnerStore } from '../../hook-runner/store.ts';
import { pruneNotingCuts, tempDataDir, waitFor } from '../helpers/hook-runner.ts';

const DAY = 24 * 60 * 60 * 1000;
const HOUR = 60 * 60 * 1000;

test('a wall clock stepped 31 days forward while the runner runs prunes no record minutes old; passes measure ages by the time passed, and follow a clock set back', async () => {
  const dataDir = tempDataDir();
  const store = openRunnerStore(dataDir);
  mock.timers.enable({ apis: ['setInterval'] });
  const T = Date.UTC(2026, 11, 6, 9, 0, 0);
  let wall = T;
  let monotonic = 40_000;
  const cuts: number[] = [];
  const pruning = new RecordPruning(pruneNotingCuts(cuts), () => undefined, () => monotonic);
  try {
    const ledger = new InvocationLedger(store, () => wall);
    await ledger.run({ orgId: 'org_a', actionId: 'act', digest: 'd'.repeat(64), inputs: 'i1', idempotencyKey: 'run_1:s', runId: 'run_1', fence: 1n }, async () => ({ outcome: { kind: 'output', outputJson: '{}' }, fuelUsed: 1 }));
    pruning.start(store, () => wall, () => true);
    await waitFor(() => cuts.length === 1, 'the pass at start');
    // An hour later in real time, the wall clock 31 days ahead of it.
    monotonic += HOUR;
    wall = T + HOUR + 31 * DAY;
    mock.timers.tick(PRUNE_INTERVAL_MS);
    await waitFor(() => cuts.length === 2, 'the hourly pass');
    assert.notEqual(store.invocations.get(['org_a', 'run_1:s']), undefined, 'the call an hour old is remembered');
    assert.equal(ledger.highestFence('org_a', 'run_1'), 1n, 'and its fence');
    // Another hour, the wall clock set back to an hour behind real time: followed.
    monotonic += HOUR;
    wall = T + HOUR;
    mock.timers.tick(PRUNE_INTERVAL_MS);
    await waitFor(() => cuts.length === 3, 'the next pass');
    assert.deepEqual(cuts, [T, T + HOUR, T + HOUR]);
  } finally {
    mock.timers.reset();
    await pruning.stop();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
