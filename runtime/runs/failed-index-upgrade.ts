// Moves a data dir's failed-event index from its old layout (`runs-failed`, keyed by event id) to
// the one ordered by arrival (FAILED_INDEX in run-store.ts), once, at boot, before any run is written.
//
// Why move rather than read both: the old key holds no time, so ordering its entries by arrival
// would read all of them (and each run) on every page, for as long as one is left. Each pass moves
// a bounded number of entries in one transaction (each old entry is removed where its new one is
// put), so a crash between passes leaves both tables correct, and the next boot moves the rest.
// Moving is idempotent (the new key is a function of the run). A data dir stamped with this layout
// or a later one (data-format.ts) has nothing left to move, and is not read at all.

import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerKey } from '../ledger/ledger.ts';
import type { RunStore } from './run-store.ts';

/** The old index: [orgId, environment, eventId, runId] -> updatedAt. Empty once upgraded. */
export const LEGACY_FAILED_INDEX = 'runs-failed';

/** The data format (data-format.ts) from which on the old table is empty. */
export const FAILED_INDEX_MOVED_FORMAT = 2;

/** Old entries moved per transaction. */
const PASS_SIZE = 1000;

/**
 * Moves every entry of the old failed-event index to the new one and resolves, with how many
 * entries it read, once that is durable. An entry whose run is gone or no longer failed is dropped:
 * the new index holds only failed runs. Call before runs are written (boot): it assumes no other
 * writer of these entries.
 */
export async function upgradeFailedIndex(ledger: Ledger, runs: RunStore, passSize = PASS_SIZE): Promise<number> {
  const legacy = ledger.openDatabase(LEGACY_FAILED_INDEX);
  let moved = 0;
  for (;;) {
    // Read outside the transaction: a range read inside one that writes to it is unspecified (ledger.ts).
    const keys = [...legacy.getKeys({ limit: passSize })] as LedgerKey[];
    if (keys.length === 0) break;
    await durably(
      ledger.root,
      ledger.root.transaction(() => {
        for (const key of keys) {
          const [orgId, , , runId] = key as [string, string, string, string];
          legacy.remove(key);
          const run = runs.get(orgId, runId);
          if (run?.value === 'failed') runs.indexFailedWithin(run);
        }
      }),
    );
    moved += keys.length;
  }
  return moved;
}
