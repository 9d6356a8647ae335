// LMDB files that lmdb-js cannot open (overwritten, zeroed, too short for its header pages, a
// directory in the data file's place, not readable and writable by this user) are named in one
// sentence before it tries: it would take the process down with SIGSEGV and print nothing. A file
// shorter than its header's last page is LMDB's own doing at times, and is opened. The runtime (`sluice serve`) exits 1 saying so; the
// hook-runner exits 2, which its supervisor does not restart (it used to restart for ever).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, closeSync, copyFileSync, mkdirSync, openSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { open } from 'lmdb';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { lmdbFilesProblem } from '../../hook-runner/lmdb-files.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { ROOT, tempDir } from '../helpers/runtime.ts';

let root: string;
/** A real runtime data file holding some records, to damage in copies. */
let intact: string;

before(async () => {
  root = tempDir('sluice-damaged-lmdb-');
  const ledger = openLedger(join(root, 'made'));
  for (let i = 0; i < 200; i += 1) await ledger.root.transaction(() => void ledger.events.put(['org_x', `evt_${i}`], { payload: 'x'.repeat(500) }));
  await ledger.close();
  intact = join(root, 'made', 'runtime', 'data.mdb');
});
after(() => rmSync(root, { recursive: true, force: true }));

/** A copy of the intact data file in a fresh environment directory, changed by `damage`; its path. */
function damagedCopy(name: string, damage: (file: string) => void): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'data.mdb');
  copyFileSync(intact, file);
  damage(file);
  return file;
}

const lockOf = (file: string): string => join(file, '..', 'lock.mdb');

test('an intact data file, or none yet, or an empty one, or one shorter than its header\'s last page, is fine', async () => {
  assert.equal(lmdbFilesProblem(intact, lockOf(intact)), undefined);
  assert.equal(lmdbFilesProblem(join(root, 'none', 'data.mdb'), join(root, 'none', 'lock.mdb')), undefined);
  assert.equal(lmdbFilesProblem(damagedCopy('empty', (file) => truncateSync(file, 0)), join(root, 'empty', 'lock.mdb')), undefined);
  // Pages taken and freed in one transaction are never written: the header counts them, the file
  // does not hold them, and LMDB opens it (a check of the size against the header refused it).
  const dir = join(root, 'short-by-design');
  const env = open({ path: join(dir, 'data.mdb'), noSubdir: true, compression: false, overlappingSync: true, separateFlushed: true });
  for (let i = 0; i < 20; i += 1) await env.put(`big_${i}`, 'x'.repeat(30_000));
  for (let i = 0; i < 20; i += 1) await env.remove(`big_${i}`);
  await env.put('small', 1);
  await env.put('small', 2);
  await env.transaction(() => {
    void env.put('huge', 'x'.repeat(900_000));
    void env.remove('huge');
  });
  await env.close();
  const file = join(dir, 'data.mdb');
  const head = readFileSync(file).subarray(0, 8192);
  const lastPage = (offset: number): bigint => head.readBigUInt64LE(offset + 144);
  const txnId = (offset: number): bigint => head.readBigUInt64LE(offset + 152);
  const newest = txnId(0) > txnId(4096) ? 0 : 4096;
  assert.ok((lastPage(newest) + 1n) * 4096n > BigInt(statSync(file).size), 'the header counts pages past the end of the file');
  assert.equal(lmdbFilesProblem(file, `${file}-lock`), undefined);
  const reopened = open({ path: file, noSubdir: true, compression: false });
  assert.equal(reopened.get('small'), 2, 'and LMDB opens it');
  await reopened.close();
});

test('a data file that is not LMDB\'s, zeroed, too short or a directory is named with what is wrong', () => {
  const hello = damagedCopy('hello', (file) => writeFileSync(file, 'hello\n'));
  assert.match(lmdbFilesProblem(hello, lockOf(hello)) ?? '', /data\.mdb is not an LMDB data file that can be opened: it has 6 bytes, fewer than LMDB's two header pages; restore it/);
  const zeroed = damagedCopy('zeroed', (file) => {
    const fd = openSync(file, 'r+');
    writeSync(fd, Buffer.alloc(16_384), 0, 16_384, 0);
    closeSync(fd);
  });
  assert.match(lmdbFilesProblem(zeroed, lockOf(zeroed)) ?? '', /neither header page holds LMDB's mark \(it was overwritten or zeroed\)/);
  const dir = join(root, 'dir-in-place');
  mkdirSync(join(dir, 'data.mdb'), { recursive: true });
  assert.match(lmdbFilesProblem(join(dir, 'data.mdb'), join(dir, 'lock.mdb')) ?? '', /data\.mdb is not a file/);
});

test('sluice serve on a damaged ledger exits 1 with that sentence; the hook-runner on a damaged store exits 2 with it', () => {
  const dataDir = join(root, 'serve');
  mkdirSync(join(dataDir, 'runtime'), { recursive: true });
  writeFileSync(join(dataDir, 'runtime', 'data.mdb'), 'hello\n');
  const serve = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'serve', '--port', '0', '--runner', 'off', '--data-dir', dataDir], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
  assert.equal(serve.status, 1, `${serve.signal ?? ''} ${serve.stderr}`);
  assert.match(serve.stderr, /^sluice: .*data\.mdb is not an LMDB data file that can be opened: it has 6 bytes/m);

  const runnerDir = join(root, 'runner');
  mkdirSync(join(runnerDir, 'hook-runner'), { recursive: true });
  writeFileSync(join(runnerDir, 'hook-runner', 'runner.mdb'), Buffer.alloc(20_000));
  const runner = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'hook-runner', '--listen', '127.0.0.1:0', '--data-dir', runnerDir], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
  assert.equal(runner.status, 2, `${runner.signal ?? ''} ${runner.stderr}`);
  assert.match(runner.stderr, /^hook-runner: .*runner\.mdb is not an LMDB data file that can be opened: neither header page holds LMDB's mark/);
  assert.doesNotMatch(runner.stderr, /\n\s+at /, 'no stack trace');
});

test('a data or lock file this user cannot read and write is named with the uid (lmdb-js died on it)', { skip: process.getuid?.() !== 0 ? 'needs root, to look as another user' : false }, () => {
  const dir = join(root, 'owned-by-root');
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  chmodSync(root, 0o755);
  const data = join(dir, 'data.mdb');
  copyFileSync(intact, data);
  chmodSync(data, 0o600);
  // What the files look like to uid 65534 (nobody), through the same function.
  const script = `import(${JSON.stringify(join(ROOT, 'hook-runner/lmdb-files.ts'))}).then((m) => process.stdout.write(String(m.lmdbFilesProblem(${JSON.stringify(data)}, ${JSON.stringify(join(dir, 'lock.mdb'))}))))`;
  const asNobody = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'env', 'HOME=/tmp', process.execPath, '--import', 'tsx', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
  assert.equal(asNobody.status, 0, asNobody.stderr);
  assert.match(asNobody.stdout, /data\.mdb cannot be read and written by this user \(uid 65534\) \(EACCES\): give it back to the user Sluice runs as/);
  assert.equal(lmdbFilesProblem(data, join(dir, 'lock.mdb')), undefined, 'its owner can');
});
