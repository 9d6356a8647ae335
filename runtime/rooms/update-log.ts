// The retained live updates of each org: [orgId, seq] -> RunUpdate, with a per-org sequence counter.
// Appends happen inside the transaction that persists the run transition, so seq order = commit order.

import { setImmediate as nextTurn } from 'node:timers/promises';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerRange, LedgerRoot, LedgerTable } from '../ledger/ledger.ts';
import type { RunUpdate } from './live-codec.ts';
import { ENVIRONMENTS } from '../sources/source-record.ts';
import type { DeletedOrgIds } from '../ledger/org-fence.ts';

export const DEFAULT_RETAINED_UPDATES = 10_000;
/** Stale updates removed per transaction by trim: the event loop and other writes go on between them. */
const TRIM_BATCH = 1000;
/** Orgs the trim looks at per event-loop turn: each costs a few reads (~14 µs), and 10,000 quiet orgs in one turn held the loop ~140 ms. */
const TRIM_ORGS_PER_TURN = 256;

export type NewRunUpdate = Omit<RunUpdate, 'seq' | 'org_id'>;

export class UpdateLog {
  readonly #root: LedgerRoot;
  readonly #updates: LedgerTable;
  readonly #counters: LedgerTable;
  /**
   * [0] -> the retention the log was last kept at; [orgId] -> a lower bound on the org's oldest
   * retained seq left by an earlier, smaller retention; [orgId, environment] -> its resetSeq.
   */
  readonly #floors: LedgerTable;
  readonly #retention: number;
  /** Last seq handed out per org. Allocation happens when a write is queued (inside conditional
   * batches, not only serialized transactions), so it must not re-read LMDB: a gap after a write
   * whose condition failed is allowed, a repeated seq is not. Primed from LMDB on first use. */
  readonly #issued = new Map<string, number>();
  readonly #firstIssued = new Map<string, number>();

  constructor(ledger: Ledger, retention: number) {
    this.#root = ledger.root;
    this.#updates = ledger.openDatabase('live-updates');
    this.#counters = ledger.openDatabase('live-seq');
    this.#floors = ledger.openDatabase('live-floor');
    this.#retention = retention;
  }

  /**
   * Brings the log from the retention it was kept at before this boot to this one; call once before
   * the first append. Raised: what the smaller one dropped stays dropped, so each org's floor
   * remembers it (a replay from below it must get 4410, not a silent skip). Lowered: each org's
   * updates beyond the new retention are trimmed now (appends only ever remove one at a time).
   */
  async adoptRetention(deletedOrgs?: DeletedOrgIds): Promise<void> {
    const previous = this.#floors.get([0]) as number | undefined;
    if (previous === this.#retention) return;
    await this.#root.transaction(() => {
      if (previous !== undefined && this.#retention > previous) {
        for (const orgId of this.#orgs()) {
          // A deleted org's updates go with it (org-deletion.ts), and it takes no write.
          if (deletedOrgs?.has(orgId) !== true) this.#floors.put([orgId], Math.max(this.#floor(orgId), this.lastSeq(orgId) - previous + 1));
        }
      }
      this.#floors.put([0], this.#retention);
    });
    if (previous !== undefined && this.#retention < previous) await this.trim();
  }

  /** Every org that has had updates. A one-part key ([orgId]) reads back as the part itself. */
  #orgs(): Iterable<string> {
    return this.#counters.getKeys({}) as Iterable<string>;
  }

  /** The highest seq handed out or stored for the org. */
  #highestSeq(orgId: string): number {
    return this.#issued.get(orgId) ?? this.lastSeq(orgId);
  }

  /** Assigns the next seq of the org and queues the update, dropping the oldest beyond retention. Call inside a write (transaction or conditional batch). */
  append(orgId: string, update: NewRunUpdate): RunUpdate {
    const stored = this.reserve(orgId, update);
    this.store(orgId, stored);
    return stored;
  }

  /** Assigns the next seq of the org to the update without writing it (a seq never stored is a gap the rooms skip). */
  reserve(orgId: string, update: NewRunUpdate): RunUpdate {
    const seq = this.#highestSeq(orgId) + 1;
    this.#issued.set(orgId, seq);
    if (!this.#firstIssued.has(orgId)) this.#firstIssued.set(orgId, seq);
    return { ...update, seq };
  }

  /** Queues a reserved update, dropping the oldest beyond retention; only writes, never reads. Call inside a write. */
  store(orgId: string, update: RunUpdate): void {
    this.#counters.put([orgId], update.seq);
    this.#updates.put([orgId, update.seq], update);
    if (update.seq > this.#retention) this.#updates.remove([orgId, update.seq - this.#retention]);
  }

  /**
   * The lowest seq the log may still hold for the org: an update leaves when the one `retention`
   * seqs above it is queued (or, kept at a smaller retention before a restart, earlier). A replay
   * whose next seq is below it has lost updates for good.
   */
  oldestRetained(orgId: string): number {
    return Math.max(1, this.#floor(orgId), this.#highestSeq(orgId) - this.#retention + 1);
  }

  #floor(orgId: string): number {
    return (this.#floors.get([orgId]) as number | undefined) ?? 0;
  }

  /** The first seq this process handed out for the org (everything before it was durable at boot). */
  firstIssued(orgId: string): number {
    return this.#firstIssued.get(orgId) ?? this.lastSeq(orgId) + 1;
  }

  /** Lets go of the seqs this process handed out to an org whose removal is finished (its updates went with it). */
  forgetOrg(orgId: string): void {
    this.#issued.delete(orgId);
    this.#firstIssued.delete(orgId);
  }

  /**
   * The highest seq on disk: the counter, the newest retained update or a reset's mark, whichever is
   * larger. Seqs are handed out when a write is queued, and batches and transactions reach the write
   * thread in different orders, so the counter written last may be a lower seq than one already
   * stored, or than the mark of a reset committed before it (the mark is stored as its resetSeq + 1:
   * a client that heard the mark as its position, then resumed after a restart, missed the update
   * that was handed the mark's seq again).
   */
  lastSeq(orgId: string): number {
    const counter = (this.#counters.get([orgId]) as number | undefined) ?? 0;
    const [newest] = this.#updates.getKeys({ start: [orgId, Number.MAX_SAFE_INTEGER], end: [orgId, 0], reverse: true, limit: 1 });
    const stored = newest === undefined ? 0 : (newest as [string, number])[1];
    return Math.max(counter, stored, this.#lastResetMark(orgId));
  }

  /** The highest mark of the org's environment resets (0: none). */
  #lastResetMark(orgId: string): number {
    let mark = 0;
    for (const environment of ENVIRONMENTS) {
      const resetSeq = this.resetSeq(orgId, environment);
      if (resetSeq > 0) mark = Math.max(mark, resetSeq + 1);
    }
    return mark;
  }

  /** Retained updates with after < seq <= upTo, oldest first; at most `limit` of them (a page) when given. */
  range(orgId: string, after: number, upTo: number, limit?: number): RunUpdate[] {
    if (upTo <= after) return [];
    const bounds = { start: [orgId, after + 1], end: [orgId, upTo + 1] };
    return [...this.#updates.getRange(limit === undefined ? bounds : { ...bounds, limit })].map(({ value }) => value as RunUpdate);
  }

  /**
   * Removes every org's updates below its oldest retained seq, `batch` per transaction; resolves
   * once that is durable. An append drops the one update it pushes out of retention in its own
   * write, so a write that did not commit (a duplicate that lost its race, a failure) leaves that one
   * behind: this sweeps them. A retention lowered at a restart leaves up to the old retention per
   * org to remove: one transaction for all of it held the event loop and every write for seconds.
   */
  async trim(batch = TRIM_BATCH): Promise<number> {
    let removed = 0;
    // The org list is read whole first: a range left open across the awaits would hold LMDB's snapshot.
    const orgs = [...this.#orgs()];
    for (const [index, orgId] of orgs.entries()) {
      // Quiet orgs have nothing to remove and no write to wait for: others' requests go between them.
      if (index > 0 && index % TRIM_ORGS_PER_TURN === 0) await nextTurn();
      for (;;) {
        const stale = [...this.#updates.getKeys({ start: [orgId, 0], end: [orgId, this.oldestRetained(orgId)], limit: batch })];
        if (stale.length === 0) break;
        await durably(this.#root, this.#root.transaction(() => stale.forEach((key) => this.#updates.remove(key))));
        removed += stale.length;
        if (stale.length < batch) break;
      }
    }
    return removed;
  }

  /**
   * The highest seq handed out when the org's environment was last reset (0: never): a client that
   * saw updates up to it may show runs the reset removed.
   */
  resetSeq(orgId: string, environment: string): number {
    return (this.#floors.get([orgId, environment]) as number | undefined) ?? 0;
  }

  /**
   * Looks at up to `limit` of the org's retained updates from seq `fromSeq` on, below its newest
   * (which removeEnvironment's reckoning needs), and removes those of `environment`; returns how
   * many it looked at and the seq to go on from. Call inside a write transaction: a sandbox reset
   * sweeps in such bounded steps before removeEnvironment, which then has little left to remove.
   */
  sweepEnvironmentWithin(orgId: string, environment: string, fromSeq: number, limit: number): { looked: number; next: number } {
    return this.#removeOf(environment, { start: [orgId, fromSeq], end: [orgId, this.lastSeq(orgId)], limit }, fromSeq);
  }

  /** Removes the updates of `environment` in `range`; how many it looked at, and the seq after the last. */
  #removeOf(environment: string, range: LedgerRange, fromSeq: number): { looked: number; next: number } {
    let looked = 0;
    let next = fromSeq;
    for (const { key, value } of [...this.#updates.getRange(range)]) {
      looked++;
      next = (key as [string, number])[1] + 1;
      if ((value as RunUpdate).environment === environment) this.#updates.remove(key);
    }
    return { looked, next };
  }

  /**
   * Removes every retained update of one org's environment (sandbox reset), remembering where
   * (resetSeq), and reserves the next seq as the reset's own mark; returns it. Once the reset is
   * durable the rooms pass over the mark (SeqOrder.passOver): a client that joins after the reset
   * hears a position past resetSeq, so resuming from it is not taken for a position before the
   * reset. Updates below `fromSeq` are not looked at (a sweep already removed that environment's).
   * Call inside a write transaction.
   */
  removeEnvironment(orgId: string, environment: string, fromSeq = 0): number {
    // The newest update may be one of those removed while the counter lags behind it (see lastSeq):
    // the counter keeps its seq (and the mark's), so that neither is handed out again after a restart.
    const highest = Math.max(this.#issued.get(orgId) ?? 0, this.lastSeq(orgId));
    const mark = highest + 1;
    this.#issued.set(orgId, mark);
    if (!this.#firstIssued.has(orgId)) this.#firstIssued.set(orgId, mark);
    this.#counters.put([orgId], mark);
    this.#floors.put([orgId, environment], highest);
    this.#removeOf(environment, { start: [orgId, fromSeq], end: [orgId, Number.MAX_SAFE_INTEGER] }, fromSeq);
    return mark;
  }
}
