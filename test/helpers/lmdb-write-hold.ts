// Holds a runtime's LMDB write lock from another process (lmdb-write-holder.ts) while a test looks
// for answers that must wait for their commit.

import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ROOT } from './runtime.ts';

export interface WriteHold {
  /** Lets the runtime's commits go on; resolves once the holder has exited. */
  release(): Promise<void>;
}

/** Resolves once the write lock of the runtime on `dataDir` is held. */
export async function holdLedgerWrites(dataDir: string): Promise<WriteHold> {
  const holder = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/helpers/lmdb-write-holder.ts'), dataDir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => holder.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: holder.stdout }).on('line', (line) => line === 'held' && resolve());
    void exited.then(() => reject(new Error('the LMDB write holder exited before it held the lock')));
  });
  return {
    release: async () => {
      writeFileSync(join(dataDir, 'release-holder'), '');
      await exited;
    },
  };
}
