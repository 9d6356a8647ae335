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
