// How many bytes of workflow versions each org keeps: every version of its workflows, and those of
// its deleted workflows until they are pruned (runs pin versions, so none is rewritten or dropped
// early). Without a total, a loop of 1,000 updates of a 0.9 MiB workflow, delete, again, grew the
// ledger by ~29 MB/s for a starter plan, until the disk floor stopped every tenant's writes.
//
// The count is kept per org in the ledger, written in the transaction of each change. An org
// written before the count existed is counted once, from its stored versions, at its first write.

import type { LedgerTable } from '../ledger/ledger.ts';
import type { WorkflowVersion } from './workflow-types.ts';

/** What a version weighs, here, in the pinned cache and against MAX_TRIGGER_BYTES: its JSON length. */
export const versionSize = (version: WorkflowVersion): number => Math.max(1, JSON.stringify(version).length);

const HIGH = '\uffff';

export class OrgVersionBytes {
  readonly #counts: LedgerTable;
  readonly #versions: LedgerTable;

  constructor(counts: LedgerTable, versions: LedgerTable) {
    this.#counts = counts;
    this.#versions = versions;
  }

  /** The org's stored version bytes; counted from its versions (and kept) when no count is stored yet. In a write transaction. */
  used(orgId: string): number {
    const stored = this.#counts.get([orgId]);
    if (typeof stored === 'number') return stored;
    let total = 0;
    for (const { value } of this.#versions.getRange({ start: [orgId], end: [orgId, HIGH] })) total += versionSize(value as WorkflowVersion);
    this.#counts.put([orgId], total);
    return total;
  }

  /** Counts a version being stored. In a write transaction. */
  add(orgId: string, bytes: number): void {
    this.#counts.put([orgId], this.used(orgId) + bytes);
  }

  /** Counts versions being removed; an org not counted yet is left so (its first count reads what is left). In a write transaction. */
  subtract(orgId: string, bytes: number): void {
    const stored = this.#counts.get([orgId]);
    if (typeof stored === 'number') this.#counts.put([orgId], Math.max(0, stored - bytes));
  }
}
