// Owner-only files. Small ones holding key material (runner token, master key, admin token): read
// one if it exists and is private, or create it crash-safely with mode 0600; files readable by
// group or others are refused. A new file appears whole or not at all, and is on disk before it is
// used: what it protects (sealed secrets, a printed token) must never outlive it. And the LMDB
// directories, whose files hold tenants' data and signing secrets.
import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, fsyncSync, linkSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { RunnerConfigError } from './runner-error.ts';

export interface PrivateFile {
  readonly text: string;
  readonly created: boolean;
}

function readExisting(path: string): string {
  const stats = lstatSync(path);
  if (!stats.isFile()) throw new RunnerConfigError(`${path} must be a regular file.`);
  if ((stats.mode & 0o077) !== 0) {
    throw new RunnerConfigError(`${path} is readable by group or others (mode ${(stats.mode & 0o777).toString(8)}); run chmod 600 on it.`);
  }
  return readFileSync(path, 'utf8').trim();
}

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
    const text = readExisting(path);
    if (text !== '') return { text, created: false };
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const text = create();
  // Written and flushed under a temporary name, then linked into place: link fails if the name
  // exists, so a process that created it meanwhile wins, and no reader ever sees a partial file.
  const temporary = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}`);
  const fd = openSync(temporary, 'wx', 0o600);
  try {
    writeSync(fd, `${text}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temporary, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { text: readExisting(path), created: false };
    throw error;
  } finally {
    unlinkSync(temporary);
  }
  syncPath(dir, 'r');
  return { text, created: true };
}

/** Creates `dir` owner-only, or makes an existing one so: a restored or mounted directory keeps its own mode otherwise. */
export function privateDirectory(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/** Makes every file directly in `dir` owner-only (LMDB creates its files with the umask's mode). */
export function privateFilesIn(dir: string): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (lstatSync(path).isFile()) chmodSync(path, 0o600);
  }
}
