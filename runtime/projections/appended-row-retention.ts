// Rows without an entity are an activity log (one per step run): each is kept for the history
// retention (--retention-days) after it was written, then pruned, oldest first, in bounded durable
// transactions beside the history prune. Rows with an entity stay until deleted through the API.

import { durably } from '../ledger/durable-write.ts';
import type { LedgerRoot } from '../ledger/ledger.ts';
import type { ProjectionStore } from './projection-store.ts';
import { deletionWritten, type DeletingOrgIds } from '../ledger/org-fence.ts';

/**
 * Removes every appended row created before `nowMs - retentionMs`, `passSize` per transaction, each
 * durable before the next is read (requests go on in between); resolves with how many entries it
 * went through, or after the pass in flight once `stop` is aborted (the runtime is closing).
 */
export async function pruneAppendedRows(root: LedgerRoot, projections: ProjectionStore, nowMs: number, retentionMs: number, passSize = 1000, stop?: AbortSignal, deletedOrgs?: DeletingOrgIds): Promise<number> {
  const cutoff = nowMs - retentionMs;
  let pruned = 0;
  for (;;) {
    const due = projections.appendedBefore(cutoff, passSize);
    if (due.length === 0) return pruned;
    // An org whose deletion is being written may stay (its mark may fail): the mark is waited for.
    for (const orgId of new Set(due.map((entry) => entry[1]))) await deletedOrgs?.marking(orgId);
    await durably(
      root,
      root.transaction(() => {
        for (const entry of due) {
          const orgId = entry[1];
          // A deleted org's rows go with it (org-deletion.ts) and its count takes no write: only the
          // entry goes. One whose mark began since is left for the next pass, as it may yet stay.
          if (deletionWritten(deletedOrgs, orgId)) projections.removeAppendedEntry(entry);
          else if (deletedOrgs?.has(orgId) !== true) projections.removeAppended(entry);
        }
      }),
    );
    pruned += due.length;
    if (due.length < passSize || stop?.aborted === true) return pruned;
  }
}
