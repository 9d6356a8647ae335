// Starting on a full disk, and on a data dir that cannot be used: each process refuses to open its
// store with less than MIN_FREE_BYTES_TO_OPEN free (lmdb-js crashed without a word below ~12 KiB),
// a disk-full error of a start is told as one, whichever layer raised it, and a file made whole
// (createLinked) leaves no temporary file when its write fails.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { availableBytes } from '../../hook-runner/disk-floor.ts';
import { assertRoomToOpen, DiskFullError, isDiskFullError, MIN_FREE_BYTES_TO_OPEN } from '../../hook-runner/disk-full.ts';
import { isUnusablePathError } from '../../hook-runner/unusable-path.ts';
import { underFileSizeLimit } from '../helpers/file-size-limit.ts';
import { ROOT, tempDir } from '../helpers/runtime.ts';

test('a store is not opened with less than MIN_FREE_BYTES_TO_OPEN free; the refusal says how much there is', () => {
  assert.throws(() => assertRoomToOpen('/data', () => 8192), (error: unknown) => error instanceof DiskFullError && /only 8192 bytes free/.test(error.message));
  assert.doesNotThrow(() => assertRoomToOpen('/data', () => MIN_FREE_BYTES_TO_OPEN));
  // The real reading of a disk with room (the test's own).
  assert.doesNotThrow(() => assertRoomToOpen(ROOT));
});

test('a filesystem that reports no size (ramfs, tmpfs size=0: zero blocks) has room, unknown how much; one with blocks has what statfs says', () => {
  assert.equal(availableBytes({ blocks: 0, bavail: 0, bsize: 4096 }), Number.POSITIVE_INFINITY);
  assert.equal(availableBytes({ blocks: 100, bavail: 3, bsize: 4096 }), 12_288);
  assert.equal(availableBytes({ blocks: 100, bavail: 0, bsize: 4096 }), 0, 'a full disk is full');
});

test('a disk-full error is known as one from Node, from lmdb-js (a numeric code) and by its words; others are not', () => {
  const errno = (code: string | number, message: string) => Object.assign(new Error(message), { code });
  assert.equal(isDiskFullError(errno('ENOSPC', 'ENOSPC: no space left on device, write')), true);
  assert.equal(isDiskFullError(errno('EDQUOT', 'EDQUOT: disk quota exceeded')), true);
  assert.equal(isDiskFullError(errno(28, 'MDB_ something')), true);
  assert.equal(isDiskFullError(new Error('No space left on device: Attempting to write page at position 8192')), true);
  assert.equal(isDiskFullError(new DiskFullError('only 10 bytes free')), true);
  assert.equal(isDiskFullError(errno('EACCES', 'EACCES: permission denied')), false);
  assert.equal(isDiskFullError('ENOSPC'), false);
  assert.equal(isUnusablePathError(errno('EROFS', 'EROFS: read-only file system')), true);
  assert.equal(isUnusablePathError(errno('ENOSPC', 'ENOSPC')), false);
});

test('a file made whole whose write fails (a full disk) leaves no temporary file behind', { timeout: 60_000 }, async () => {
  const dir = tempDir('sluice-linked-full-');
  try {
    const script = `
import { createLinked } from ${JSON.stringify(`${ROOT}/hook-runner/linked-file.ts`)};
try { createLinked(process.argv[1] + '/owner.pid', 'x'.repeat(64 * 1024)); console.log('written'); } catch (error) { console.log(error.code); }
`;
    const { stdout } = await promisify(execFile)('bash', underFileSizeLimit(4, [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script, dir]), { cwd: ROOT });
    assert.equal(stdout.trim(), 'EFBIG', 'the write failed as on a full disk');
    assert.deepEqual(readdirSync(dir), [], 'neither the file nor its temporary one is left');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Starts `entry` (with `args`) on a data dir that is a file; resolves with how it ended, which must be a refusal. */
async function startedOnAFile(entry: readonly string[], args: readonly string[]): Promise<{ code: number; stderr: string }> {
  const dir = tempDir('sluice-unusable-');
  try {
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    const run = promisify(execFile)(process.execPath, ['--import', 'tsx', ...entry, '--data-dir', file, ...args], { cwd: ROOT });
    return await run.then(() => assert.fail('it started'), (error: { code: number; stderr: string }) => error);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a hook-runner whose data dir cannot be used says so in one line (exit 2), no stack trace', { timeout: 60_000 }, async () => {
  const failed = await startedOnAFile(['hook-runner/main.ts'], ['--listen', '127.0.0.1:0']);
  assert.equal(failed.code, 2);
  assert.match(failed.stderr, /^hook-runner: The data dir .*a-file cannot be used: ENOTDIR: not a directory.*Fix its ownership, permissions or path and start again\.\n$/);
});

test('sluice serve on a data dir that cannot be used says so in one line, naming it, with what to do', { timeout: 60_000 }, async () => {
  const failed = await startedOnAFile(['runtime/cli.ts', 'serve'], ['--port', '0']);
  assert.equal(failed.code, 1);
  assert.match(failed.stderr, /^sluice: The data dir .*a-file cannot be used: ENOTDIR: not a directory.*Fix its ownership, permissions or path and start again\.\n$/);
});

test('sluice serve on a data dir that is a symlink to nowhere says so in the same line (ENOENT, where its parents would have been made)', { timeout: 60_000 }, async () => {
  const dir = tempDir('sluice-unusable-');
  try {
    const link = join(dir, 'dangling');
    symlinkSync(join(dir, 'nowhere', 'at-all'), link);
    const run = promisify(execFile)(process.execPath, ['--import', 'tsx', 'runtime/cli.ts', 'serve', '--data-dir', link, '--port', '0'], { cwd: ROOT });
    const failed = await run.then(() => assert.fail('it started'), (error: { code: number; stderr: string }) => error);
    assert.equal(failed.code, 1);
    assert.match(failed.stderr, /^sluice: The data dir .*dangling cannot be used: ENOENT: no such file or directory.*Fix its ownership, permissions or path and start again\.\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
