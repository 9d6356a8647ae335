// Looks at an LMDB environment's files before lmdb-js opens them. lmdb-js 3.5 takes down the
// process with no word (SIGSEGV) when its data file is not LMDB's (overwritten, zeroed, too short
// for its header pages), or when this user cannot read and write the data or lock file (restored
// as another user); here each is a sentence naming the file. A file cut short past its header
// pages is not judged: LMDB's own files may be shorter than their header's last page (pages taken
// and freed in one transaction are never written), so the size cannot tell a cut from that.
// (Shared by the runtime's ledger and the hook-runner's store, which imports no runtime code.)

import { accessSync, closeSync, constants, openSync, readSync, statSync } from 'node:fs';

/** LMDB's magic number, at the start of each of the two meta pages' records (little-endian). */
const MAGIC = 0xbeefc0de;
/** Where it is in a meta page (after the page header), in the format of the LMDB inside lmdb-js 3.5. */
const AT_MAGIC = 24;
/** The free-page database's `md_pad`, where LMDB keeps the page size. */
const AT_PAGE_SIZE = 48;
/** The smallest page LMDB writes; the first meta page says the real size. */
const MIN_PAGE_SIZE = 4096;

/** Whether the page at `offset` of `head` holds LMDB's magic. */
const holdsMagic = (head: Buffer, offset: number): boolean => head.length >= offset + AT_MAGIC + 4 && head.readUInt32LE(offset + AT_MAGIC) === MAGIC;

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
  // The second header page follows the first, whose record says the page size.
  const statedSize = holdsMagic(head, 0) ? head.readUInt32LE(AT_PAGE_SIZE) : MIN_PAGE_SIZE;
  const pageSize = statedSize >= MIN_PAGE_SIZE && statedSize <= MIN_PAGE_SIZE * 4 ? statedSize : MIN_PAGE_SIZE;
  if (!holdsMagic(head, 0) && !holdsMagic(head, pageSize)) return `${damaged}: neither header page holds LMDB's mark (it was overwritten or zeroed); ${restore}`;
  return undefined;
}

/** Why LMDB cannot open the environment of `dataFile` and `lockFile`, as a sentence, or undefined when it can. */
export function lmdbFilesProblem(dataFile: string, lockFile: string): string | undefined {
  return accessProblem(dataFile) ?? accessProblem(lockFile) ?? dataFileProblem(dataFile);
}
