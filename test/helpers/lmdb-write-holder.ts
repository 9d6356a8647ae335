// Holds the write lock of a runtime's LMDB environment from another process, as a slow disk or a
// long transaction would: the runtime's commits wait behind it. Crash tests use it to show that no
// answer goes out before its write has committed. Run as a child: `tsx lmdb-write-holder.ts <dir>`;
// it prints `held` once it holds the lock and lets go when the file `<dir>/release-holder` appears.

import { existsSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';

const [dataDir] = process.argv.slice(2);
if (dataDir === undefined) throw new Error('usage: lmdb-write-holder.ts <runtime data dir>');
const root = open({ path: join(dataDir, 'runtime'), maxDbs: 64 });
const pause = new Int32Array(new SharedArrayBuffer(4));
root.transactionSync(() => {
  writeSync(1, 'held\n');
  while (!existsSync(join(dataDir, 'release-holder'))) Atomics.wait(pause, 0, 0, 10);
});
await root.close();
