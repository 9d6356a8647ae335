// Owner-only directories for the LMDB environments of the runtime and the runner: their files hold
// tenants' data and signing secrets, and LMDB creates them with the umask's mode.

import { chmodSync, lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** Creates `dir` owner-only, or makes an existing one so: a restored or mounted directory keeps its own mode otherwise. */
export function privateDirectory(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
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
