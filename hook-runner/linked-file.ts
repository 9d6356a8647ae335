// Creating a file whole, or not at all: its text is written and flushed under a private temporary
// name, then hard-linked to its real name, which fails if that name exists. No reader ever sees a
// partial file, and of processes creating the same file at once exactly one succeeds.

import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, openSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/**
 * Creates `path` (mode 0600) holding `text`; false, changing nothing, when it already exists. The
 * temporary file goes whatever happens (a write that fails on a full disk left one per start).
 */
export function createLinked(path: string, text: string): boolean {
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}`);
  const fd = openSync(temporary, 'wx', 0o600);
  try {
    try {
      // Whole: writeSync stops short when the disk fills (or a size limit is met), leaving part of it.
      writeFileSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    linkSync(temporary, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    unlinkQuietly(temporary);
  }
}

/** Removes `path`; a removal that fails leaves it (the error being handled matters more than a stray temporary file). */
function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Left behind: named as temporary (a leading dot, the pid), it holds nothing another read uses.
  }
}
