// A hook-runner whose pass pruning old invocation records and fences fails says so: its log names
// the error, its Health answers prune_failing, and the runtime's /metrics shows
// sluice_hook_runner_prune_failing 1 (the records keep growing until a pass works). The next pass
// that works clears it; passes are hourly, so that part runs on mocked timers.

import assert from 'node:assert/strict';
import { test, mock } from 'node:test';
import { rmSync } from 'node:fs';
import { RecordPruning } from '../../hook-runner/pruning-schedule.ts';
import { PRUNE_INTERVAL_MS, pruneRunnerRecords } from '../../hook-runner/record-pruning.ts';
import { createHookRunnerServer } from '../../hook-runner/server.ts';
import { loadRunnerToken } from '../../hook-runner/runner-token.ts';
import { openRunnerStore } from '../../hook-runner/store.ts';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { runnerLineLevel } from '../../runtime/hook-runner/connect-runner.ts';
import { call } from '../helpers/http.ts';
import { newMasterKey, tempDataDir, waitFor } from '../helpers/hook-runner.ts';
import { startRuntime } from '../helpers/runtime.ts';

const failingPrune: typeof pruneRunnerRecords = () => Promise.reject(new Error('MDB_PROBLEM: injected prune failure'));

test("a failed prune shows in the runner's Health and log and in the runtime's /metrics", { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir();
  // The runtime reads its runner token from <dataDir>/runner-token: the runner gets the same one.
  const token = loadRunnerToken(undefined, dataDir);
  const lines: string[] = [];
  const server = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, masterKey: newMasterKey(), log: (line) => void lines.push(line), pruneRecords: failingPrune });
  const client = new HookRunnerClient(server.address, token, { attempts: 1 });
  const rt = await startRuntime({ dataDir, args: ['--runner', server.address] });
  try {
    await waitFor(() => lines.some((line) => line.includes('pruning old invocation records failed')), 'the failure to be logged');
    const failure = lines.find((line) => line.includes('pruning old invocation records failed')) ?? '';
    assert.ok(failure.includes('MDB_PROBLEM: injected prune failure'), lines.join('\n'));
    // A runtime that started this runner as its child logs the line at warn, seen at the default level.
    assert.equal(runnerLineLevel(failure), 'warn', failure);
    const health = await client.health();
    assert.deepEqual([health.ok, health.pruneFailing], [true, true]);
    const metrics = (await call(rt.url, 'GET', '/metrics')).text;
    assert.match(metrics, /^sluice_hook_runner_up 1$/m);
    assert.match(metrics, /^sluice_hook_runner_prune_failing 1$/m);
  } finally {
    await rt.close();
    client.close();
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('the next pass that works clears the failure; a stop waits for the pass in progress and starts no more', async () => {
  const dataDir = tempDataDir();
  const store = openRunnerStore(dataDir);
  mock.timers.enable({ apis: ['setInterval'] });
  try {
    let passes = 0;
    let finish: () => void = () => undefined;
    const pruning = new RecordPruning(async (...args) => {
      passes += 1;
      if (passes === 1) throw new Error('injected');
      if (passes === 3) await new Promise<void>((resolve) => (finish = resolve));
      return pruneRunnerRecords(...args);
    }, () => undefined);
    pruning.start(store, Date.now, () => true);
    await waitFor(() => pruning.failing, 'the first pass to fail');
    mock.timers.tick(PRUNE_INTERVAL_MS);
    await waitFor(() => !pruning.failing, 'the second pass to work');
    assert.equal(passes, 2);
    mock.timers.tick(PRUNE_INTERVAL_MS);
    await waitFor(() => passes === 3, 'the third pass to start');
    let stopped = false;
    const stopping = pruning.stop().then(() => (stopped = true));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(stopped, false, 'waits for the pass in progress');
    finish();
    await stopping;
    mock.timers.tick(PRUNE_INTERVAL_MS * 3);
    assert.equal(passes, 3, 'no pass after the stop');
  } finally {
    mock.timers.reset();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
