// The retained live updates of each org: [orgId, seq] -> RunUpdate, with a per-org sequence counter.
// Appends happen inside the transaction that persists the run transition, so seq order = commit order.

import type { LedgerTable } from '../ledger/ledger.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { RunUpdate } from './live-codec.ts';

export const DEFAULT_RETAINED_UPDATES = 10_000;

export type NewRunUpdate = Omit<RunUpdate, 'seq' | 'org_id'>;

export class UpdateLog {
  readonly #updates: LedgerTable;
  readonly #counters: LedgerTable;
  readonly #retention: number;
  /** Last seq handed out per org. Allocation happens when a write is queued (inside conditional
   * batches, not only serialized transactions), so it must not re-read LMDB: a gap after a write
   * whose condition failed is allowed, a repeated seq is not. Primed from LMDB on first use. */
  readonly #issued = new Map<string, number>();
  readonly #firstIssued = new Map<string, number>();

  constructor(ledger: Ledger, retention: number) {
    this.#updates = ledger.openDatabase('live-updates');
    this.#counters = ledger.openDatabase('live-seq');
    this.#retention = retention;
  }

  /** Assigns the next seq of the org and queues the update, dropping the oldest beyond retention. Call inside a write (transaction or conditional batch). */
  append(orgId: string, update: NewRunUpdate): RunUpdate {
    const seq = (this.#issued.get(orgId) ?? this.lastSeq(orgId)) + 1;
    this.#issued.set(orgId, seq);
    if (!this.#firstIssued.has(orgId)) this.#firstIssued.set(orgId, seq);
    const stored: RunUpdate = { ...update, seq };
    this.#counters.put([orgId], seq);
    this.#updates.put([orgId, seq], stored);
    if (seq > this.#retention) this.#updates.remove([orgId, seq - this.#retention]);
    return stored;
  }

  /**
   * The lowest seq the log may still hold for the org: an update leaves when the one `retention`
   * seqs above it is queued. A replay whose next seq is below it has lost updates for good.
   */
  oldestRetained(orgId: string): number {
    return Math.max(1, (this.#issued.get(orgId) ?? this.lastSeq(orgId)) - this.#retention + 1);
  }

  /** The first seq this process handed out for the org (everything before it was durable at boot). */
  firstIssued(orgId: string): number {
    return this.#firstIssued.get(orgId) ?? this.lastSeq(orgId) + 1;
  }

  /**
   * The highest seq on disk: the counter or the newest retained update, whichever is larger. Seqs
   * are handed out when a write is queued, and batches and transactions reach the write thread in
   * different orders, so the counter written last may be a lower seq than one already stored.
   */
  lastSeq(orgId: string): number {
    const counter = (this.#counters.get([orgId]) as number | undefined) ?? 0;
    const [newest] = this.#updates.getKeys({ start: [orgId, Number.MAX_SAFE_INTEGER], end: [orgId, 0], reverse: true, limit: 1 });
    const stored = newest === undefined ? 0 : (newest as [string, number])[1];
    return Math.max(counter, stored);
  }

  /** Retained updates with after < seq <= upTo, oldest first; at most `limit` of them (a page) when given. */
  range(orgId: string, after: number, upTo: number, limit?: number): RunUpdate[] {
    if (upTo <= after) return [];
    const bounds = { start: [orgId, after + 1], end: [orgId, upTo + 1] };
    return [...this.#updates.getRange(limit === undefined ? bounds : { ...bounds, limit })].map(({ value }) => value as RunUpdate);
  }

  /** Removes every retained update of one org's environment (sandbox reset); call inside a write transaction. */
  removeEnvironment(orgId: string, environment: string): void {
    for (const { key, value } of this.#updates.getRange({ start: [orgId, 0], end: [orgId, Number.MAX_SAFE_INTEGER] })) {
      if ((value as RunUpdate).environment === environment) this.#updates.remove(key);
    }
  }
}
