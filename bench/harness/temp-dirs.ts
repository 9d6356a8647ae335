// Owns the bench's temporary directories (data dirs, request pools): one root per run,
// removed as a whole when the run ends, whatever happened.

import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export class TempDirs {
  readonly root: string;
  #next = 0;

  /** `parent` must be on a real disk: durability numbers measured on tmpfs mean nothing. */
  constructor(parent: string = tmpdir()) {
    this.root = mkdtempSync(join(parent, 'sluice-bench-'));
  }

  /** A fresh, empty directory under the run's root. */
  make(name: string): string {
    this.#next += 1;
    const dir = join(this.root, `${String(this.#next).padStart(2, '0')}-${name}`);
    mkdirSync(dir);
    return dir;
  }

  removeAll(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}
