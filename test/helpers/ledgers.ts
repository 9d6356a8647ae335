// Every implementation of the ledger interface, for tests that must pass on each: LMDB in a temp
// dir (removed on close) and memory.

import { rmSync } from 'node:fs';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { openMemoryLedger } from '../../runtime/ledger/memory-ledger.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { tempDir } from './runtime.ts';

export interface LedgerKind {
  readonly name: string;
  open(): { readonly ledger: Ledger; close(): Promise<void> };
}

/** LMDB in a temp dir: the ledger a test that exercises one kind only should run on. */
export const LMDB_LEDGER: LedgerKind = {
  name: 'lmdb',
  open() {
    const dir = tempDir();
    const ledger = openLedger(dir);
    return {
      ledger,
      close: async () => {
        await ledger.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

export const LEDGER_KINDS: readonly LedgerKind[] = [
  LMDB_LEDGER,
  {
    name: 'memory',
    open() {
      const ledger = openMemoryLedger();
      return { ledger, close: () => ledger.close() };
    },
  },
];

/**
 * `ledger` as seen through a counter of the values read from its table `name` (by key or by range;
 * key-only reads are not counted): `reads()` says how many so far.
 */
export function countingValueReads(ledger: Ledger, name: string): { readonly ledger: Ledger; readonly reads: () => number } {
  let reads = 0;
  const open = ledger.openDatabase.bind(ledger);
  const counting: Ledger = Object.create(ledger, {
    openDatabase: {
      value: (opened: string) => {
        const table = open(opened);
        if (opened !== name) return table;
        return new Proxy(table, {
          get: (target, property) => {
            if (property === 'get') return (key: never) => (reads++, target.get(key));
            if (property === 'getRange') return function* (range: never) { for (const entry of target.getRange(range)) { reads++; yield entry; } };
            const value = Reflect.get(target, property);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
      },
    },
  });
  return { ledger: counting, reads: () => reads };
}
