// The tenant inbox: one claim per (org, source, provider event id), written in the same
// transaction as the event. A live claim makes a repeat delivery a 409; old claims are pruned.

import type { Key } from 'lmdb';
import type { Ledger } from '../ledger/open-ledger.ts';
import { durably } from '../ledger/durable-write.ts';

export const DEFAULT_DEDUP_WINDOW_MS = 7 * 24 * 60 * 60 * 1000;

export interface InboxClaim {
  readonly event_id: string;
  readonly claimed_at_ms: number;
}

export class Inbox {
  readonly #ledger: Ledger;
  readonly #windowMs: number;
  constructor(ledger: Ledger, windowMs: number) {
    this.#ledger = ledger;
    this.#windowMs = windowMs;
  }

  /** The claim that makes this delivery a duplicate, if one is still inside the dedup window. Call inside a write transaction. */
  liveClaim(orgId: string, source: string, providerEventId: string, nowMs: number): InboxClaim | undefined {
    const claim = this.#ledger.inbox.get([orgId, source, providerEventId]) as InboxClaim | undefined;
    return claim !== undefined && claim.claimed_at_ms > nowMs - this.#windowMs ? claim : undefined;
  }

  /** Writes a claim; call inside the write that stores the event. */
  writeClaim(orgId: string, source: string, providerEventId: string, eventId: string, nowMs: number): void {
    const claim: InboxClaim = { event_id: eventId, claimed_at_ms: nowMs };
    this.#ledger.inbox.put([orgId, source, providerEventId], claim);
  }

  /**
   * Removes claims older than the window, scanning at most `scanLimit` claims from `from` on; resolves
   * once the removal is durable with the number removed and where the next call should continue
   * (undefined after the last claim). Ingest writes no time index for claims (one record less per
   * event), so pruning walks the claims themselves, a bounded slice per call, off the hot path.
   */
  async prune(nowMs: number, scanLimit = 50_000, from?: Key[]): Promise<{ removed: number; next: Key[] | undefined }> {
    const { inbox, root } = this.#ledger;
    const cutoff = nowMs - this.#windowMs;
    const expired: Array<{ key: Key[]; at: number }> = [];
    let last: Key[] | undefined;
    let scanned = 0;
    for (const { key, value } of inbox.getRange(from === undefined ? { limit: scanLimit } : { start: from, limit: scanLimit + 1 })) {
      if (from !== undefined && scanned === 0 && JSON.stringify(key) === JSON.stringify(from)) continue;
      scanned++;
      last = key as Key[];
      const claim = value as InboxClaim;
      if (claim.claimed_at_ms <= cutoff) expired.push({ key: key as Key[], at: claim.claimed_at_ms });
      if (scanned >= scanLimit) break;
    }
    if (expired.length > 0) {
      await durably(
        root,
        root.transaction(() => {
          for (const { key, at } of expired) {
            // A claim renewed since the scan is left in place.
            if ((inbox.get(key) as InboxClaim | undefined)?.claimed_at_ms === at) inbox.remove(key);
          }
        }),
      );
    }
    return { removed: expired.length, next: scanned >= scanLimit ? last : undefined };
  }

  /** Prunes every expired claim, `sliceSize` claims scanned per step; resolves with the number removed. */
  async pruneAll(nowMs: number, sliceSize = 50_000): Promise<number> {
    let removed = 0;
    let from: Key[] | undefined;
    do {
      const slice = await this.prune(nowMs, sliceSize, from);
      removed += slice.removed;
      from = slice.next;
    } while (from !== undefined);
    return removed;
  }
}
