// Per-org sandbox generations: each sandbox reset starts a new one, and a sandbox run's id mixes in
// its org's generation, so an event id re-sent after a reset makes new runs (new effect keys, fresh
// fences) while within one generation it stays a duplicate. Production has no generation.
//
// Table `sandbox-generations`: [orgId] -> { generation, reset_since_ms? } (absent: 0, the generation
// before any reset). `reset_since_ms` marks a reset under way: its removal runs in several
// transactions (sandbox-reset.ts), and a reset cut short is finished at the next start.
// Ordering: a reset advances the generation inside its first transaction (resetSandbox). A transaction
// ordered after it reads the new value (the cache is bypassed while a reset is in flight, as in
// record-cache.ts). A conditional batch, how API events are stored, runs its callback when it is
// made, not when it commits: it could read the old generation yet commit after the reset, which is
// why the events API holds an org's sandbox events while that org is `resetting`.

import type { Ledger, LedgerTable } from '../ledger/ledger.ts';
import { RecordCache } from '../ledger/record-cache.ts';

interface GenerationRecord {
  readonly generation: number;
  /** When the reset still under way started; absent when none is. */
  readonly reset_since_ms?: number;
}

const BEFORE_ANY_RESET: GenerationRecord = Object.freeze({ generation: 0 });
const ignore = (): void => undefined;

/** One per ledger (the run store's): its cache assumes it is the table's only writer. */
export class SandboxGenerations {
  readonly #table: LedgerTable;
  /** Read for every sandbox event; generation 0 is cached too, so an org never reset costs no ledger read. */
  readonly #cache = new RecordCache<GenerationRecord>();
  /** Per org, settles once every reset in flight (queued, committed or flushing) has settled; never rejects. */
  readonly #resets = new Map<string, Promise<void>>();

  constructor(ledger: Ledger) {
    this.#table = ledger.openDatabase('sandbox-generations');
  }

  /** The org's current sandbox generation: 0 until its first reset. */
  current(orgId: string): number {
    return this.#cache.read(orgId, '', () => this.#load(orgId))?.generation ?? 0;
  }

  /** Whether a reset of the org is in flight. */
  resetting(orgId: string): boolean {
    return this.#resets.has(orgId);
  }

  /** Settles (never rejects) once the resets of the org in flight now have settled, durable or failed. */
  settled(orgId: string): Promise<void> {
    return this.#resets.get(orgId) ?? Promise.resolve();
  }

  /** Resolves once no reset of the org is in flight; a sandbox event is stored only then (see the header). */
  async quiet(orgId: string): Promise<void> {
    while (this.resetting(orgId)) await this.settled(orgId);
  }

  /**
   * Runs `reset`, the durable writes that begin and end the reset (`beginResetWithin`,
   * `endResetWithin`), after any reset of the org still in flight, and resolves with its result.
   * The org is `resetting` from this call until `reset` settles, and meanwhile reads of its
   * generation bypass the cache.
   */
  during<T>(orgId: string, reset: () => Promise<T>): Promise<T> {
    // A reset asked for while one is in flight starts once that one has settled: two interleaved
    // would split the removal (and its counts) between them, and the first to end would clear the
    // mark of the other.
    const previous = this.#resets.get(orgId);
    const write = this.#cache.writing(orgId, previous === undefined ? reset : () => previous.then(reset));
    const done = Promise.all([previous, write.then(ignore, ignore)]).then(ignore);
    this.#resets.set(orgId, done);
    void done.then(() => {
      if (this.#resets.get(orgId) === done) this.#resets.delete(orgId);
    });
    return write;
  }

  /**
   * Starts the org's next generation, marks its reset as under way, and returns the generation.
   * Call inside the reset's first write transaction, before anything is removed: a generation whose
   * runs were deleted is never reused.
   */
  beginResetWithin(orgId: string, nowMs: number): number {
    const generation = this.#load(orgId).generation + 1;
    this.#table.put([orgId], { generation, reset_since_ms: nowMs } satisfies GenerationRecord);
    return generation;
  }

  /** Clears the org's reset mark. Call inside the reset's last write transaction, with the last removals. */
  endResetWithin(orgId: string): void {
    this.#table.put([orgId], { generation: this.#load(orgId).generation } satisfies GenerationRecord);
  }

  /** The orgs whose reset was cut short (a crash, a failed write): still marked as under way. */
  interruptedResets(): string[] {
    const orgs: string[] = [];
    for (const { key, value } of this.#table.getRange({})) {
      // A one-part key reads back as its part from LMDB (ordered-binary), as written from memory.
      if ((value as GenerationRecord).reset_since_ms !== undefined) orgs.push(String(Array.isArray(key) ? key[0] : key));
    }
    return orgs;
  }

  #load(orgId: string): GenerationRecord {
    return (this.#table.get([orgId]) as GenerationRecord | undefined) ?? BEFORE_ANY_RESET;
  }
}
