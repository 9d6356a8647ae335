// The runner store's lock comes first and goes last: a runner refused for a live owner has written
// nothing into the store, and a start that fails after taking the lock gives it back at once, so
// the next start (a supervisor's retry) finds the store free instead of a lock to judge stale.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { DataDirInUseError } from '../../hook-runner/dir-lock.ts';
import { createHookRunnerServer } from '../../hook-runner/server.ts';
import { openRunnerStore, runnerStoreDir } from '../../hook-runner/store.ts';
import { newToken, tempDataDir } from '../helpers/hook-runner.ts';

const startRunner = (dataDir: string) => createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token: newToken(), log: () => undefined });

test('a runner refused for a live owner of its store has opened and written nothing there', async () => {
  const dataDir = tempDataDir();
  try {
    const storeDir = runnerStoreDir(dataDir);
    mkdirSync(storeDir, { recursive: true });
    // The test's parent process: alive, and not this process (whose own lock would pass).
    writeFileSync(join(storeDir, 'owner.pid'), `${process.ppid}\n`);
    const refusal = await startRunner(dataDir).then(async (server) => void (await server.close()), (error: Error) => error);
    assert.ok(refusal instanceof DataDirInUseError, String(refusal));
    assert.deepEqual(readdirSync(storeDir), ['owner.pid'], 'no LMDB files, no mark, no master key');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a store that fails to open gives its lock back; a runner whose start fails after the lock leaves none', async () => {
  const dataDir = tempDataDir();
  try {
    const storeDir = runnerStoreDir(dataDir);
    // A directory where its data file goes cannot be opened (named before LMDB tries, lmdb-files.ts).
    mkdirSync(join(storeDir, 'runner.mdb'), { recursive: true });
    assert.throws(() => openRunnerStore(dataDir), /runner\.mdb is not a file/);
    assert.equal(existsSync(join(storeDir, 'owner.pid')), false, 'released by the failed open');
    rmSync(join(storeDir, 'runner.mdb'), { recursive: true });

    // The key file is read after the store is open and locked: an unusable one fails the start.
    mkdirSync(join(storeDir, 'master.key'));
    const refusal = await startRunner(dataDir).then(async (server) => void (await server.close()), (error: Error) => error);
    assert.ok(refusal instanceof Error, 'the start failed');
    assert.equal(existsSync(join(storeDir, 'owner.pid')), false, 'released by the failed start');
    rmSync(join(storeDir, 'master.key'), { recursive: true });

    const server = await startRunner(dataDir);
    assert.equal(existsSync(join(storeDir, 'owner.pid')), true, 'held while it serves');
    await server.close();
    assert.equal(existsSync(join(storeDir, 'owner.pid')), false, 'released at shutdown');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
