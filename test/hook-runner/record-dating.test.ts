// The runner dates its call records by a clock a set back does not take back (server.ts,
// elapsed-bounded-clock.ts): a call made while the wall clock was 31 days behind was dated by it,
// and once the clock was put right the next pass pruned it as 31 days old; the same key retried
// then ran its guest again. The real server and guest on real LMDB, with injected wall and
// monotonic clocks and mocked pass timers.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { mock, test } from 'node:test';
import { PRUNE_INTERVAL_MS } from '../../hook-runner/record-pruning.ts';
import { createHookRunnerServer } from '../../hook-runner/server.ts';
import { HookRunnerClient, type InvokeResult } from '../../runtime/hook-runner/client.ts';
import { invocation, newMasterKey, newToken, parseOutput, pruneNotingCuts, tempDataDir, waitFor } from '../helpers/hook-runner.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';

const DAY = 24 * 60 * 60 * 1000;
const MINUTE = 60 * 1000;

const payloadOf = (result: InvokeResult): unknown => (result.outcome.kind === 'output' ? parseOutput(result.outcome.outputJson)['payload'] : result.outcome.kind);

test('a call made while the wall clock was set back 31 days is still remembered after it is put right and a pass has run', { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir();
  const token = newToken();
  const T = Date.UTC(2026, 11, 6, 9, 0, 0);
  let wall = T;
  let monotonic = 1_000;
  const cuts: number[] = [];
  mock.timers.enable({ apis: ['setInterval'] });
  const server = await createHookRunnerServer({
    listen: '127.0.0.1:0',
    dataDir,
    token,
    masterKey: newMasterKey(),
    log: () => undefined,
    now: () => wall,
    monotonic: () => monotonic,
    pruneRecords: pruneNotingCuts(cuts),
  });
  const client = new HookRunnerClient(server.address, token, { attempts: 1 });
  try {
    await waitFor(() => cuts.length === 1, 'the pass at start');
    const echo = await client.compile(await assembleWat('echo', ECHO_WAT));
    const call = invocation(echo, { idempotencyKey: 'run_back:step', payloadJson: '{"attempt":1}' });
    // A minute later, the wall clock 31 days behind.
    monotonic += MINUTE;
    wall = T + MINUTE - 31 * DAY;
    assert.equal((await client.invoke(call)).replayed, false);
    // Put right a minute after that; the hourly pass runs.
    monotonic += MINUTE;
    wall = T + 2 * MINUTE;
    mock.timers.tick(PRUNE_INTERVAL_MS);
    await waitFor(() => cuts.length === 2, 'the next pass');
    assert.equal(cuts[1], T + 2 * MINUTE);
    // Had the guest run again it would echo attempt 2.
    const retried = await client.invoke({ ...call, payloadJson: '{"attempt":2}' });
    assert.equal(retried.replayed, true, 'the retry is answered from the record, the guest not run again');
    assert.deepEqual(payloadOf(retried), { attempt: 1 });
  } finally {
    mock.timers.reset();
    client.close();
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
