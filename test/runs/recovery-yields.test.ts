// Boot recovery reads unfinished runs in batches and lets the event loop turn between them (so
// that requests such as /healthz can be answered during a long recovery). The batching alone, on
// a store that hands out run ids: what a recovered run becomes is test/e2e/run-crash-safety.test.ts.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LiveRooms } from '../../runtime/rooms/live-rooms.ts';
import type { UpdateLog } from '../../runtime/rooms/update-log.ts';
import { LMDB_LEDGER } from '../helpers/ledgers.ts';
import { countTurns } from '../helpers/loop-turns.ts';
import { RECOVERY_BATCH, recoverUnfinishedRuns } from '../../runtime/runs/run-recovery.ts';
import type { RunStore } from '../../runtime/runs/run-store.ts';

test('reading the unfinished runs lets the event loop turn between batches', async () => {
  const opened = LMDB_LEDGER.open();
  const { ledger } = opened;
  try {
    const total = 2 * RECOVERY_BATCH + 500;
    const turnsSeenAt: number[] = [];
    // Counts event-loop turns for as long as recovery reads.
    const turns = countTurns();
    const runs = {
      *unfinished() {
        for (let i = 0; i < total; i++) yield { orgId: 'org', runId: `run_${i}` };
      },
      get: () => {
        turnsSeenAt.push(turns.count());
        return undefined;
      },
    } as unknown as RunStore;
    const recovered = await recoverUnfinishedRuns({ ledger, runs, updateLog: {} as UpdateLog, rooms: {} as LiveRooms, updateFor: () => assert.fail('nothing to reclaim'), admitNow: () => assert.fail('nothing to admit'), release: () => assert.fail('nothing to release') }, Date.now()).finally(turns.stop);
    assert.deepEqual(recovered, { runs: [], interrupted: 0, failed: 0 });
    assert.equal(turnsSeenAt.length, total);
    assert.ok(turnsSeenAt[total - 1]! >= 2, `the loop turned ${turnsSeenAt[total - 1]} times while ${total} runs were read`);
    assert.equal(turnsSeenAt[RECOVERY_BATCH - 2], turnsSeenAt[0], 'no turn inside a batch');
  } finally {
    await opened.close();
  }
});
