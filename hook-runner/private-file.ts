// Small owner-only files holding key material (runner token, master key): read one if it exists
// and is private, or create it atomically with mode 0600. Refuses files readable by group or others.
import { closeSync, lstatSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
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

/** Returns the file's trimmed text, creating it with `create()` (mode 0600, exclusive) when absent. */
export function readOrCreatePrivateFile(path: string, create: () => string): PrivateFile {
  try {
    return { text: readExisting(path), created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const text = create();
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o600);
  } catch (error) {
    // Another process created it between our read and our create: theirs wins.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { text: readExisting(path), created: false };
    throw error;
  }
  try {
    writeSync(fd, `${text}\n`);
  } finally {
    closeSync(fd);
  }
  return { text, created: true };
}
