// One runtime per data directory: the lock file names its owner; a live owner refuses a second
// runtime with a clear message, a dead one's lock (or a reused pid's, or one from before a reboot)
// is taken over (by one process at a time: the holder of the takeover file), processes racing for
// it get one lock, and closing the ledger releases it.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs, { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { DataDirInUseError, lockDataDir } from '../../hook-runner/dir-lock.ts';
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
  assert.equal((JSON.parse(readFileSync(join(path, 'owner.pid'), 'utf8')) as { pid: number }).pid, process.pid, 'taken over');
  assert.doesNotThrow(() => lockDataDir(path), 'the same process');
  release();
  assert.equal(existsSync(join(path, 'owner.pid')), false, 'released');
});

test('an empty lock file (no owner named) is stale and taken over; only an absent one is tried again', () => {
  const path = join(dir, 'empty');
  mkdirSync(path, { recursive: true });
  writeFileSync(join(path, 'owner.pid'), '');
  const release = lockDataDir(path);
  assert.equal((JSON.parse(readFileSync(join(path, 'owner.pid'), 'utf8')) as { pid: number }).pid, process.pid, 'taken over');
  release();
});

test('a killed owner that its parent has not reaped yet (a zombie) holds nothing: its lock is taken over', () => {
  const path = join(dir, 'zombie');
  mkdirSync(path, { recursive: true });
  const child = spawn(process.execPath, ['-e', 'setInterval(() => undefined, 1000)']);
  child.kill('SIGKILL');
  // Node reaps children from its event loop, which this synchronous test keeps from running.
  const state = () => readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]?.[0];
  while (state() !== 'Z');
  writeFileSync(join(path, 'owner.pid'), JSON.stringify({ pid: child.pid, host: hostname() }));
  const release = lockDataDir(path);
  assert.equal((JSON.parse(readFileSync(join(path, 'owner.pid'), 'utf8')) as { pid: number }).pid, process.pid, 'taken over');
  release();
});

test('a live pid from another boot or with another start time is a stale lock; another host\'s is not', () => {
  const path = join(dir, 'owners');
  mkdirSync(path, { recursive: true });
  const lock = (owner: Record<string, unknown>) => {
    writeFileSync(join(path, 'owner.pid'), JSON.stringify(owner));
    return () => lockDataDir(path);
  };
  const live = { pid: process.ppid, host: hostname() };
  lock({ ...live, boot: 'an-earlier-boot' })()();
  lock({ ...live, start: '1' })()();
  assert.throws(lock({ ...live, host: 'another-host' }), (error: unknown) => error instanceof DataDirInUseError && error.message.includes(`process ${process.ppid} on another-host`) && /if nothing on another-host uses the directory any more .*, remove \S+owner\.pid and start again\.$/.test(error.message));
});

test('a stale lock is taken away only by the holder of the takeover file: one held by a live process waits, one left by a dead process is cleared', () => {
  const path = join(dir, 'takeover');
  mkdirSync(path, { recursive: true });
  const gone = spawnSync(process.execPath, ['-e', '']).pid;
  writeFileSync(join(path, 'owner.pid'), `${gone}\n`);
  // A live process (this one's parent) is taking the stale lock away: nobody else removes it.
  writeFileSync(join(path, 'owner.pid.takeover'), JSON.stringify({ pid: process.ppid, host: hostname() }));
  assert.throws(() => lockDataDir(path), (error: unknown) => error instanceof DataDirInUseError && /could not take its lock \(another Sluice runtime is starting on it; if none is, .*remove \S+owner\.pid\.takeover and start again\)/.test(error.message));
  assert.equal(readFileSync(join(path, 'owner.pid'), 'utf8'), `${gone}\n`, 'the stale lock is left to the takeover\'s holder');
  // Its holder died while taking it over: the takeover file is cleared, the lock taken.
  writeFileSync(join(path, 'owner.pid.takeover'), JSON.stringify({ pid: gone, host: hostname() }));
  const release = lockDataDir(path);
  assert.equal((JSON.parse(readFileSync(join(path, 'owner.pid'), 'utf8')) as { pid: number }).pid, process.pid, 'taken over');
  assert.equal(existsSync(join(path, 'owner.pid.takeover')), false, 'no takeover file left');
  release();
});

test("a lock gone between a failed link and its read is no stale lock: one another process links meanwhile is never removed (found by a review)", () => {
  const path = join(dir, 'vanishing');
  mkdirSync(path, { recursive: true });
  const lock = join(path, 'owner.pid');
  writeFileSync(lock, `${JSON.stringify({ pid: spawnSync(process.execPath, ['-e', '']).pid, host: hostname() })}\n`);
  // Another process's lock (a live one: this process's parent).
  const other = `${JSON.stringify({ pid: process.ppid, host: hostname() })}\n`;
  let reads = 0;
  let otherLinked = false;
  const original = fs.readFileSync;
  // The first read finds the stale lock taken away by another process's takeover; after the
  // second, another process links its own.
  (fs as { readFileSync: unknown }).readFileSync = function (this: unknown, file: unknown, ...rest: unknown[]) {
    if (file !== lock) return Reflect.apply(original, this, [file, ...rest]);
    reads += 1;
    if (reads === 1) fs.unlinkSync(lock);
    try {
      return Reflect.apply(original, this, [file, ...rest]);
    } finally {
      if (reads === 2 && !fs.existsSync(lock)) {
        fs.writeFileSync(lock, other);
        otherLinked = true;
      }
    }
  };
  syncBuiltinESMExports();
  let release: (() => void) | undefined;
  try {
    release = lockDataDir(path);
  } catch (error) {
    assert.ok(error instanceof DataDirInUseError, String(error));
  } finally {
    (fs as { readFileSync: unknown }).readFileSync = original;
    syncBuiltinESMExports();
  }
  const now = readFileSync(lock, 'utf8');
  if (otherLinked) assert.equal(now, other, "the other process's lock stays");
  else assert.equal((JSON.parse(now) as { pid: number }).pid, process.pid, 'this process took the freed directory');
  assert.equal(release !== undefined, !otherLinked, 'exactly one holder');
  release?.();
});

test('processes starting at once on one directory: exactly one gets the lock', () => {
  const path = join(dir, 'race');
  mkdirSync(path, { recursive: true });
  writeFileSync(join(path, 'owner.pid'), `${spawnSync(process.execPath, ['-e', '']).pid}\n`, { mode: 0o600 });
  // All four try at the same wall-clock moment, once each has started.
  const at = Date.now() + 3000;
  const script = `
    import { lockDataDir } from './hook-runner/dir-lock.ts';
    while (Date.now() < ${at});
    try { lockDataDir(${JSON.stringify(path)}); process.stdout.write('locked'); } catch { process.stdout.write('refused'); }
    setTimeout(() => undefined, 1500);
  `;
  const children = Array.from({ length: 4 }, () => spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: join(import.meta.dirname, '..', '..') }));
  return Promise.all(children.map((child) => new Promise<string>((resolve) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.on('exit', () => resolve(out));
  }))).then((outcomes) => {
    assert.equal(outcomes.filter((o) => o === 'locked').length, 1, outcomes.join(','));
    assert.equal(outcomes.filter((o) => o === 'refused').length, 3, outcomes.join(','));
  });
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

test('a ledger that fails to open gives its lock back at once', () => {
  const dataDir = join(dir, 'unopenable');
  // A directory where its data file goes cannot be opened (named before LMDB tries, lmdb-files.ts).
  mkdirSync(join(dataDir, 'runtime', 'data.mdb'), { recursive: true });
  assert.throws(() => openLedger(dataDir), /data\.mdb is not a file/);
  assert.equal(existsSync(join(dataDir, 'runtime', 'owner.pid')), false);
});
