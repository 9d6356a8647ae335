// Small owner-only files holding key material (runner token, master key, admin token): read one if
// it exists and is private, or create it crash-safely with mode 0600; files readable by group or
// others are refused. A new file appears whole or not at all, and is on disk before it is used:
// what it protects (sealed secrets, a printed token) must never outlive it.
import { closeSync, fsyncSync, lstatSync, mkdirSync, openSync, readFileSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import { createLinked } from './linked-file.ts';
import { RunnerConfigError } from './runner-error.ts';

export interface PrivateFile {
  readonly text: string;
  readonly created: boolean;
}

function readExisting(path: string): { readonly text: string; readonly inode: number } {
  const stats = lstatSync(path);
  if (!stats.isFile()) throw new RunnerConfigError(`${path} must be a regular file.`);
  if ((stats.mode & 0o077) !== 0) {
    throw new RunnerConfigError(`${path} is readable by group or others (mode ${(stats.mode & 0o777).toString(8)}); run chmod 600 on it.`);
  }
  return { text: readFileSync(path, 'utf8').trim(), inode: stats.ino };
}

/**
 * Removes the empty file seen as `inode`, unless another process has replaced it with its own key
 * since (a new file is linked into place whole, under another inode): that key must stay.
 */
export function removeIfStillEmpty(path: string, inode: number): void {
  const now = lstatSync(path);
  if (now.ino === inode && now.size === 0) unlinkSync(path);
}

/** Makes a directory's entries (a file created, renamed or removed in it) durable. */
export const syncDirectory = (dir: string): void => syncPath(dir, 'r');

function syncPath(path: string, flags: string): void {
  const fd = openSync(path, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Returns the file's trimmed text, creating it with `create()` (mode 0600) when absent. An empty
 * file counts as absent: earlier releases could leave one behind when killed while creating it, and
 * nothing was ever protected by it.
 */
export function readOrCreatePrivateFile(path: string, create: () => string): PrivateFile {
  try {
    const existing = readExisting(path);
    if (existing.text !== '') return { text: existing.text, created: false };
    removeIfStillEmpty(path, existing.inode);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const text = create();
  // A process that created it meanwhile wins.
  if (!createLinked(path, `${text}\n`)) return { text: readExisting(path).text, created: false };
  syncDirectory(dir);
  return { text, created: true };
}
