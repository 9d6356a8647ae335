// Owner-only key files (runner token, master key, admin token): created whole with mode 0600 and
// no temporary left behind; an empty file left by a killed earlier release is replaced; a file
// readable by others, or an admin token too short to use, is refused with a message naming it. The
// LMDB directories of the runtime and the runner are owner-only too, even when they existed before.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { privateDirectory } from '../../hook-runner/private-directory.ts';
import { readOrCreatePrivateFile, removeIfStillEmpty } from '../../hook-runner/private-file.ts';
import { createHookRunnerServer } from '../../hook-runner/server.ts';
import { openRunnerStore } from '../../hook-runner/store.ts';
import { loadAdminToken } from '../../runtime/auth/admin-token.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { newToken, tempDataDir } from '../helpers/hook-runner.ts';
import { tempDir } from '../helpers/runtime.ts';

const dir = tempDir('sluice-private-file-');
after(() => rmSync(dir, { recursive: true, force: true }));

test('a new file is created whole with mode 0600, and read back as it is afterwards', () => {
  const path = join(dir, 'nested', 'master.key');
  const created = readOrCreatePrivateFile(path, () => 'first');
  assert.deepEqual(created, { text: 'first', created: true });
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.deepEqual(readdirSync(join(dir, 'nested')), ['master.key'], 'no temporary file is left');
  assert.deepEqual(readOrCreatePrivateFile(path, () => 'second'), { text: 'first', created: false });
});

test('an empty file (killed between creating and writing it) is replaced', () => {
  const path = join(dir, 'runner-token');
  writeFileSync(path, '', { mode: 0o600 });
  assert.deepEqual(readOrCreatePrivateFile(path, () => 'fresh'), { text: 'fresh', created: true });
});

test('an empty file is removed only while it is still that empty file: a key another process put in its place stays', () => {
  const path = join(dir, 'shared-token');
  writeFileSync(path, '', { mode: 0o600 });
  const emptyInode = statSync(path).ino;
  // Another process created its key meanwhile (under a new inode, linked into place whole).
  writeFileSync(`${path}.theirs`, 'their-token\n', { mode: 0o600 });
  renameSync(`${path}.theirs`, path);
  removeIfStillEmpty(path, emptyInode);
  assert.equal(readFileSync(path, 'utf8'), 'their-token\n');
  removeIfStillEmpty(path, statSync(path).ino);
  assert.equal(readFileSync(path, 'utf8'), 'their-token\n', 'not empty: kept');
});

test('a file readable by group or others is refused', () => {
  const path = join(dir, 'open.key');
  writeFileSync(path, 'secret\n');
  chmodSync(path, 0o644);
  assert.throws(() => readOrCreatePrivateFile(path, () => 'x'), /readable by group or others \(mode 644\); run chmod 600/);
});

test('the admin token file is private too, and must hold a usable token', () => {
  const path = join(dir, 'admin-token');
  const generated = loadAdminToken(undefined, path);
  assert.match(generated.token, /^sluice_admin_/);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.equal(loadAdminToken(undefined, path).token, generated.token, 'the same token on the next start');
  assert.equal(loadAdminToken('configured-token-0123', path).token, 'configured-token-0123', 'a configured token wins');

  chmodSync(path, 0o640);
  assert.throws(() => loadAdminToken(undefined, path), /readable by group or others/);
  writeFileSync(path, 'short\n', { mode: 0o600 });
  chmodSync(path, 0o600);
  assert.throws(() => loadAdminToken(undefined, path), /must be 16-512 visible ASCII characters \(no spaces\) \(it holds 5\)/);
  // A token no bearer header can carry would start a runtime every request to is a 401.
  writeFileSync(path, 'my admin token for sluice prod\n');
  assert.throws(() => loadAdminToken(undefined, path), /admin-token holds no usable token: .*\(it holds 30, not all of them visible ASCII\)/);
  writeFileSync(path, `${'é'.repeat(17)}\n`);
  assert.throws(() => loadAdminToken(undefined, path), /\(it holds 17, not all of them visible ASCII\)/);
  writeFileSync(path, 'x'.repeat(513));
  assert.throws(() => loadAdminToken(undefined, path), /\(it holds 513\)/);
});

test('the LMDB directories and their files are owner-only, also when the directory was there before', async () => {
  const dataDir = join(dir, 'restored');
  for (const sub of ['runtime', 'hook-runner']) mkdirSync(join(dataDir, sub), { recursive: true, mode: 0o755 });
  const ledger = openLedger(dataDir);
  const store = openRunnerStore(dataDir);
  try {
    for (const sub of ['runtime', 'hook-runner']) {
      const path = join(dataDir, sub);
      assert.equal(statSync(path).mode & 0o777, 0o700, path);
      const files = readdirSync(path);
      assert.ok(files.length >= 2, `${path} holds the LMDB files`);
      for (const name of files) assert.equal(statSync(join(path, name)).mode & 0o777, 0o600, join(path, name));
    }
  } finally {
    await ledger.close();
    await store.close();
  }
});

/** A runner server on `dataDir` with its master key from the key file there (made on first start). */
const startRunnerServerOnce = (dataDir: string) => createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token: newToken(), log: () => undefined });

test('a runner store whose master.key others can read is refused at start, not quietly made private', async () => {
  const dataDir = tempDataDir();
  try {
    const first = await startRunnerServerOnce(dataDir);
    await first.close();
    const keyPath = join(dataDir, 'hook-runner', 'master.key');
    chmodSync(keyPath, 0o644);
    // A start that wrongly succeeds is closed again, so a failure here cannot leave the test running.
    const refusal = await startRunnerServerOnce(dataDir).then(async (server) => void (await server.close()), (error: Error) => error);
    assert.match(String(refusal?.message), /master\.key is readable by group or others \(mode 644\); run chmod 600 on it/);
    assert.equal(statSync(keyPath).mode & 0o777, 0o644, 'left as found, for the operator to see (and rotate)');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a data dir that cannot be made (under /proc) is an error naming it, not a retry for ever at full CPU', () => {
  // In a child process with a deadline: a regression spins synchronously, which no in-process timeout could stop.
  const script = `import { privateDirectory } from ${JSON.stringify(new URL('../../hook-runner/private-directory.ts', import.meta.url).href)};
try { privateDirectory('/proc/sluice-private-dir-test/data'); console.log('made'); } catch (error) { console.log(error.code, error.message); }`;
  const result = spawnSync(process.execPath, ['--import', import.meta.resolve('tsx'), '--input-type=module', '--eval', script], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(result.signal, null, 'it returned before its deadline');
  assert.match(result.stdout, /^ENOENT ENOENT: no such file or directory, mkdir '\/proc\/sluice-private-dir-test'/);
  // Nested missing levels are made, owner-only.
  const nested = join(dir, 'a', 'b', 'c');
  privateDirectory(nested);
  assert.deepEqual([statSync(join(dir, 'a')).mode & 0o777, statSync(nested).mode & 0o777], [0o700, 0o700]);
});
