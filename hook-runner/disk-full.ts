// A data dir whose disk is full, told as such. Opening an LMDB store with (almost) no free space
// makes lmdb-js crash the process without a word (SIGSEGV/SIGBUS below ~12 KiB here) or fail with a
// bare errno, and a start that fills the disk writing its lock or key files fails with ENOSPC from
// wherever it was: each process checks the room before it opens its store (assertRoomToOpen) and
// reports any disk-full error of its start in one line saying what to do. (Shared by both
// processes; the runner imports no runtime code.)

import { statfsSync } from 'node:fs';
import { availableBytes } from './disk-floor.ts';

/** Free space a process wants before it opens its store: far more than the opening itself writes. */
export const MIN_FREE_BYTES_TO_OPEN = 1024 * 1024;

/** ENOSPC's number on Linux, which lmdb-js reports as a numeric `code`. */
const ENOSPC_ERRNO = 28;

/** The disk holding a data dir is full (or nearly): the process does not start. */
export class DiskFullError extends Error {
  override readonly name = 'DiskFullError';
}

/** Whether `error` says the disk is full, whichever layer reported it (Node's fs, lmdb-js). */
export function isDiskFullError(error: unknown): boolean {
  if (error instanceof DiskFullError) return true;
  if (!(error instanceof Error)) return false;
  const code: unknown = (error as { code?: unknown }).code;
  return code === 'ENOSPC' || code === 'EDQUOT' || code === ENOSPC_ERRNO || /No space left on device|Disk quota exceeded/i.test(error.message);
}

/** What to print for a start with the data dir `dataDir` that failed on a full disk: the error's own words, then what to do. */
export const diskFullAdvice = (dataDir: string, error: unknown): string =>
  `The disk of the data dir ${dataDir} is full (${error instanceof Error ? error.message : String(error)}): free space there (or start on another --data-dir), then start again.`;

/** Bytes free to this process on the filesystem holding `dir` (disk-floor.ts); unknown (infinite) when statfs fails there, which no start needed before it checked. */
const freeBytesAt = (dir: string): number => {
  try {
    return availableBytes(statfsSync(dir));
  } catch {
    return Number.POSITIVE_INFINITY;
  }
};

/** Throws DiskFullError when the disk holding `dir` has less than MIN_FREE_BYTES_TO_OPEN free to this process (`freeBytesOf`: tests give theirs). */
export function assertRoomToOpen(dir: string, freeBytesOf: (dir: string) => number = freeBytesAt): void {
  const free = freeBytesOf(dir);
  if (free >= MIN_FREE_BYTES_TO_OPEN) return;
  throw new DiskFullError(`only ${free} bytes free, and opening the store needs ${MIN_FREE_BYTES_TO_OPEN}`);
}
