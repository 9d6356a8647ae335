// The pinned versions a workflow store keeps decoded, bounded by count and JSON size (PINNED_CACHE),
// and which of them it must not keep yet: those written by a write that has not settled.

import { LRUCache } from 'lru-cache';
import { KeyedCounts } from '../../actors/keyed-counts.ts';
import { versionSize } from './version-bytes.ts';
import type { WorkflowVersion } from './workflow-types.ts';

export class PinnedVersions {
  /** Decoded pinned versions, least recently used out first: every event and step reads one, and a version never changes. */
  readonly #cache: LRUCache<string, WorkflowVersion>;
  /**
   * The #cache slots of versions written by writes not yet settled: read meanwhile (from a
   * transaction batched with the write, as ingest's), such a version may never commit, so it is not
   * kept. Other versions of the org are cached as usual, so a busy org's cache still warms.
   */
  readonly #slotsWriting = new KeyedCounts();
  /** The slots the transaction body running now writes (set and counted by `writing` around it). */
  #bodySlots: string[] | undefined;

  constructor(limits: { readonly max: number; readonly maxBytes: number }) {
    this.#cache = new LRUCache({ max: limits.max, maxSize: limits.maxBytes, sizeCalculation: versionSize });
  }

  /** How many pinned versions are held decoded, and their JSON size (at most the `maxBytes` given). */
  get held(): { readonly versions: number; readonly bytes: number } {
    return { versions: this.#cache.size, bytes: this.#cache.calculatedSize };
  }

  /** The version, held or else `load`ed (the ledger read), and then held unless an unsettled write wrote it. */
  read(orgId: string, workflowId: string, version: number, load: () => WorkflowVersion | undefined): WorkflowVersion | undefined {
    const slot = pinnedSlot(orgId, workflowId, version);
    const cached = this.#cache.get(slot);
    if (cached !== undefined) return cached;
    const stored = load();
    if (stored === undefined) return undefined;
    if (this.#slotsWriting.get(slot) === 0) this.#cache.set(slot, stored);
    return stored;
  }

  /** Notes a version the running transaction body writes, so none holds it before that write settles. Inside `writing`'s body. */
  writtenWithin(orgId: string, workflowId: string, version: number): void {
    this.#bodySlots?.push(pinnedSlot(orgId, workflowId, version));
  }

  /**
   * Runs `commit` with `body` wrapped so that the versions it notes (writtenWithin) are not held
   * from the moment it has run until the promise `commit` returns settles; resolves as that does.
   */
  writing<T>(body: () => T, commit: (tracked: () => T) => Promise<T>): Promise<T> {
    const slots: string[] = [];
    // Counted once the body ran, before any transaction batched after it reads them.
    const tracked = (): T => {
      this.#bodySlots = slots;
      try {
        return body();
      } finally {
        this.#bodySlots = undefined;
        for (const slot of slots) this.#slotsWriting.add(slot);
      }
    };
    const settled = (): void => {
      for (const slot of slots) this.#slotsWriting.subtract(slot);
    };
    return commit(tracked).finally(settled);
  }
}

/** A pinned version's key in #cache. */
const pinnedSlot = (orgId: string, workflowId: string, version: number): string => `${orgId}\u0000${workflowId}\u0000${version}`;
