// Owner-only directories for the LMDB environments of the runtime and the runner: their files hold
// tenants' data and signing secrets, and LMDB creates them with the umask's mode.

import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** Creates `dir` owner-only, or makes an existing one so: a restored or mounted directory keeps its own mode otherwise. */
export function privateDirectory(dir: string): void {
  makeDirectories(dir);
  chmodSync(dir, 0o700);
}

/**
 * Creates `dir` and its missing parents (owner-only), one level at a time: Node 20's recursive
 * mkdirSync retries for ever, at full CPU, where mkdir answers ENOENT under a parent that exists
 * (a --data-dir under /proc), where this throws that error.
 */
function makeDirectories(dir: string): void {
  const missing: string[] = [];
  for (let at = resolve(dir); !existsSync(at) && dirname(at) !== at; at = dirname(at)) missing.push(at);
  for (const path of missing.reverse()) {
    try {
      mkdirSync(path, { mode: 0o700 });
    } catch (error) {
      // Made meanwhile by another process starting on the same tree: as good as made here.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

/**
 * Makes owner-only the files directly in `dir` whose names start with `prefix` (an LMDB
 * environment's data and lock files). Key files are left to their own check (private-file.ts),
 * which refuses one readable by others, so an exposed key is reported, not quietly hidden.
 */
export function privateFilesIn(dir: string, prefix: string): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (name.startsWith(prefix) && lstatSync(path).isFile()) chmodSync(path, 0o600);
  }
}
