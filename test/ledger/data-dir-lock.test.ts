// One runtime per data directory: the lock file names its owner; a live owner refuses a second
// runtime with a clear message, a dead one's lock is taken over, and closing the ledger releases it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { DataDirInUseError, lockDataDir } from '../../runtime/ledger/data-dir-lock.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { spawnRuntime, tempDir } from '../helpers/runtime.ts';

const dir = tempDir('sluice-lock-');
after(() => rmSync(dir, { recursive: true, force: true }));

test('a live owner refuses the lock; a gone one is taken over; this process may lock twice', () => {
  const path = join(dir, 'unit');
  mkdirSync(path, { recursive: true });
  writeFileSync(join(path, 'owner.pid'), `${process.ppid}\n`);
  assert.throws(() => lockDataDir(path), (error: unknown) => error instanceof DataDirInUseError && error.message.includes(`in use by process ${process.ppid}`));

  const gone = spawnSync(process.execPath, ['-e', '']).pid;
  writeFileSync(join(path, 'owner.pid'), `${gone}\n`);
  const release = lockDataDir(path);
  assert.equal(readFileSync(join(path, 'owner.pid'), 'utf8').trim(), String(process.pid), 'taken over');
  assert.doesNotThrow(() => lockDataDir(path), 'the same process');
  release();
  assert.equal(existsSync(join(path, 'owner.pid')), false, 'released');
});

test('a second runtime on a data dir in use exits with a message; closing the first frees the dir', async () => {
  const dataDir = join(dir, 'runtime-data');
  const first = await spawnRuntime(dataDir);
  await assert.rejects(spawnRuntime(dataDir), /in use by process \d+: run one Sluice runtime per data directory/);
  first.child.kill('SIGTERM');
  await first.exited;
  const ledger = openLedger(dataDir);
  await ledger.close();
});
