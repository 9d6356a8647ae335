// Creating a file whole, or not at all: its text is written and flushed under a private temporary
// name, then hard-linked to its real name, which fails if that name exists. No reader ever sees a
// partial file, and of processes creating the same file at once exactly one succeeds.

import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** Creates `path` (mode 0600) holding `text`; false, changing nothing, when it already exists. */
export function createLinked(path: string, text: string): boolean {
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}`);
  const fd = openSync(temporary, 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temporary, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    unlinkSync(temporary);
  }
}
