// Looks at an LMDB environment's files before lmdb-js opens them. lmdb-js 3.5 takes down the
// process with no word (SIGSEGV, SIGBUS) when its data file is not LMDB's (overwritten, zeroed),
// is cut short (a copy that did not finish), or when this user cannot read and write the data or
// lock file (restored as another user); here each is a sentence naming the file.
// (Shared by the runtime's ledger and the hook-runner's store, which imports no runtime code.)

import { accessSync, closeSync, constants, openSync, readSync, statSync } from 'node:fs';

/** LMDB's magic number, at the start of each of the two meta pages' records (little-endian). */
const MAGIC = 0xbeefc0de;
/** The data format of the LMDB inside lmdb-js 3.5; the offsets below are that format's. */
const DATA_VERSION = 2;
/** Offsets in a meta page: its page header, then the meta record. */
const AT_MAGIC = 24;
const AT_VERSION = 28;
/** The free-page database's `md_pad`, where LMDB keeps the page size. */
const AT_PAGE_SIZE = 48;
const AT_LAST_PAGE = 144;
const AT_TXN_ID = 152;
/** The smallest page LMDB writes; the first meta page says the real size. */
const MIN_PAGE_SIZE = 4096;

interface Meta {
  readonly pageSize: number;
  readonly lastPage: bigint;
  readonly txnId: bigint;
  readonly version: number;
}

/** The meta record of the page at `offset` of `head`, or undefined when it does not hold LMDB's magic. */
function metaAt(head: Buffer, offset: number): Meta | undefined {
  if (head.length < offset + AT_TXN_ID + 8 || head.readUInt32LE(offset + AT_MAGIC) !== MAGIC) return undefined;
  return {
    pageSize: head.readUInt32LE(offset + AT_PAGE_SIZE),
    lastPage: head.readBigUInt64LE(offset + AT_LAST_PAGE),
    txnId: head.readBigUInt64LE(offset + AT_TXN_ID),
    version: head.readUInt32LE(offset + AT_VERSION),
  };
}

/** Why this user cannot read and write `file`, if it exists and they cannot. */
function accessProblem(file: string): string | undefined {
  try {
    accessSync(file, constants.R_OK | constants.W_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    const uid = process.getuid?.();
    return `${file} cannot be read and written by this user${uid === undefined ? '' : ` (uid ${uid})`} (${code}): give it back to the user Sluice runs as, or run Sluice as its owner.`;
  }
}

/** Why the LMDB data file `file` cannot be opened, if it exists and looks damaged. */
function dataFileProblem(file: string): string | undefined {
  const stats = statSync(file, { throwIfNoEntry: false });
  if (stats === undefined || stats.size === 0) return undefined; // LMDB makes a new one
  if (!stats.isFile()) return `${file} is not a file: LMDB keeps its data there.`;
  const damaged = `${file} is not an LMDB data file that can be opened`;
  const restore = 'restore it (and its directory) from a backup, or move it away to start empty.';
  if (stats.size < 2 * MIN_PAGE_SIZE) return `${damaged}: it has ${stats.size} bytes, fewer than LMDB's two header pages; ${restore}`;
  const head = Buffer.alloc(Math.min(stats.size, 4 * MIN_PAGE_SIZE));
  const fd = openSync(file, 'r');
  try {
    readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  const first = metaAt(head, 0);
  const pageSize = first?.pageSize !== undefined && first.pageSize >= MIN_PAGE_SIZE && first.pageSize <= MIN_PAGE_SIZE * 4 ? first.pageSize : MIN_PAGE_SIZE;
  const metas = [first, metaAt(head, pageSize)].filter((meta): meta is Meta => meta !== undefined);
  if (metas.length === 0) return `${damaged}: neither header page holds LMDB's mark (it was overwritten or zeroed); ${restore}`;
  // LMDB opens the header of the latest transaction; another data format has its fields elsewhere.
  const latest = metas.reduce((a, b) => (b.txnId > a.txnId ? b : a));
  if (latest.version !== DATA_VERSION) return undefined;
  const needed = (latest.lastPage + 1n) * BigInt(pageSize);
  if (BigInt(stats.size) < needed) return `${damaged}: its header names ${needed} bytes of pages and the file has ${stats.size} (it was cut short, such as by a copy that did not finish); ${restore}`;
  return undefined;
}

/** Why LMDB cannot open the environment of `dataFile` and `lockFile`, as a sentence, or undefined when it can. */
export function lmdbFilesProblem(dataFile: string, lockFile: string): string | undefined {
  return accessProblem(dataFile) ?? accessProblem(lockFile) ?? dataFileProblem(dataFile);
}
