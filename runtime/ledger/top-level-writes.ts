// Tells the writes that commit on their own (a put, remove, ifNoExists, batch or transaction
// started outside any group) from those made inside a batch, ifNoExists or transaction callback,
// which commit with their group (ledger.ts: group callbacks start no groups). Whatever stands in front
// of a ledger's writes (open-ledger.ts watches them, floored-ledger.ts refuses them below the disk
// floor) goes through here, so it sees each commit once and never cuts a group in half.

import type { LedgerKey, LedgerTable } from './ledger.ts';

/** Stands in front of a write that commits on its own: `issue` starts it. */
export type AroundWrite = <T>(issue: () => T) => T;

export class TopLevelWrites {
  readonly #around: AroundWrite;
  /** Group callbacks running now. */
  #inside = 0;

  constructor(around: AroundWrite) {
    this.#around = around;
  }

  /** Whether a group's callback is running now (a write made now belongs to it). */
  get insideGroup(): boolean {
    return this.#inside > 0;
  }

  /** `issue()`, through `around` unless it is made inside a group's callback. */
  write<T>(issue: () => T): T {
    return this.#inside > 0 ? issue() : this.#around(issue);
  }

  /** `body` marked as a group's callback while it runs. */
  within<T>(body: () => T): () => T {
    return () => {
      this.#inside += 1;
      try {
        return body();
      } finally {
        this.#inside -= 1;
      }
    };
  }

  /** The table with its put, remove and ifNoExists through `write` (changed in place). */
  table(table: LedgerTable): LedgerTable {
    const { put, remove, ifNoExists } = table;
    return Object.assign(table, {
      put: (key: LedgerKey, value: unknown) => this.write(() => put.call(table, key, value)),
      remove: (key: LedgerKey) => this.write(() => remove.call(table, key)),
      ifNoExists: (key: LedgerKey, writes: () => void) => this.write(() => ifNoExists.call(table, key, this.within(writes))),
    });
  }
}
