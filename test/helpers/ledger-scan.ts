// Reads an LMDB environment a stopped process left, byte for byte: every record of every named
// database, keys and values undecoded, searched for the bytes of some ids. What an org's deletion
// tests check that not one byte of the org is left (the ids are stored as UTF-8 in keys and values).

import assert from 'node:assert/strict';
import { open, type RootDatabase } from 'lmdb';

export interface ScanResult {
  /** A line per record holding the first id ("table: the record's start"). */
  readonly found: string[];
  /** How many records hold the second id (proof that the scan read what stayed). */
  readonly othersRecords: number;
}

/** Scans every database of the environment at `path` but `except` (which must exist) for `id`, counting the records of `other`. */
export function scanFor(path: string, id: string, other: string, except: readonly string[]): ScanResult {
  const raw = { keyEncoding: 'binary', encoding: 'binary' } as const;
  const env = open({ path, maxDbs: 64, readOnly: true, ...raw } as never) as RootDatabase;
  const [needle, otherNeedle] = [Buffer.from(id), Buffer.from(other)];
  const found: string[] = [];
  let othersRecords = 0;
  try {
    // Named databases are the main database's keys, NUL-terminated.
    const names = [...env.getKeys({})].map((name) => Buffer.from(name as Uint8Array).toString('utf8').replace(/\0$/, ''));
    for (const name of except) assert.ok(names.includes(name), `${name} among ${names.join()}`);
    for (const name of names.filter((n) => !except.includes(n))) {
      const table = env.openDB({ name, ...raw } as never) as RootDatabase;
      for (const { key, value } of table.getRange({})) {
        const bytes = Buffer.concat([Buffer.from(key as Uint8Array), Buffer.from(value as Uint8Array)]);
        if (bytes.includes(needle)) found.push(`${name}: ${bytes.toString('utf8').slice(0, 80)}`);
        if (bytes.includes(otherNeedle)) othersRecords++;
      }
    }
  } finally {
    void env.close();
  }
  return { found, othersRecords };
}
