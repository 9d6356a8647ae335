// One runtime per data directory. LMDB lets many processes share an environment, but a second
// runtime would run boot recovery over the first one's steps in flight (sending them again under a
// higher fence), and each keeps its own sequence counters and caches. The lock is a file holding
// its owner's pid, created exclusively; one left by a process that no longer runs is taken over.

import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** Thrown when another running process holds the directory. */
export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function ownerOf(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Takes `dir`'s lock for this process, or throws DataDirInUseError naming the process that holds
 * it. Returns the release (call on close). A second lock of the same directory in the same process
 * is allowed, and released with the first.
 */
export function lockDataDir(dir: string): () => void {
  const path = join(dir, 'owner.pid');
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      try {
        writeSync(fd, `${process.pid}\n`);
      } finally {
        closeSync(fd);
      }
      return () => {
        if (ownerOf(path) === process.pid) unlinkSync(path);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = ownerOf(path);
    if (owner === process.pid) return () => undefined;
    if (owner !== undefined && isRunning(owner)) {
      throw new DataDirInUseError(`${dir} is in use by process ${owner}: run one Sluice runtime per data directory.`);
    }
    // Left by a process that is gone (or unreadable, from a crash while it was written).
    try {
      unlinkSync(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  throw new DataDirInUseError(`${dir}: could not take its lock (another runtime is starting on it).`);
}
