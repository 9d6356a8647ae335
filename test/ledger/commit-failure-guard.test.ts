// The guard against lmdb-js's stray rejections for a failed commit, in a real child process: such a
// rejection is logged and the process goes on; any other unhandled rejection still ends it. The
// requests, runs and device messages a failed commit refuses log at debug, the guard speaking for them.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { isFailedWrite, logFailure } from '../../runtime/ledger/commit-failure-guard.ts';
import { DiskSpaceLowError } from '../../hook-runner/disk-floor.ts';
import { nackFrame } from '../../runtime/triggers/device-frame.ts';
import { underFileSizeLimit } from '../helpers/file-size-limit.ts';

const ROOT = join(import.meta.dirname, '..', '..');

/** Runs `body` in a child with the guard installed; returns its exit code and output. */
function withGuard(body: string): { status: number | null; stdout: string; stderr: string } {
  const script = `
    import { guardLedgerCommitFailures } from './runtime/ledger/commit-failure-guard.ts';
    import { createLogger } from './runtime/log.ts';
    guardLedgerCommitFailures(createLogger('error'));
    ${body}
    setTimeout(() => process.stdout.write('still running\\n'), 50);
  `;
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });
  return { status: child.status, stdout: child.stdout, stderr: child.stderr };
}

test('a stray commit failure, as lmdb-js rejects it, is logged and the process goes on', () => {
  const result = withGuard(`
    let rejectCommit;
    const commitError = new Promise((_, reject) => (rejectCommit = reject));
    Promise.reject(Object.assign(new Error('Commit failed (see commitError for details)'), { commitError }));
    setTimeout(() => rejectCommit(new Error('Input/output error')), 10);
  `);
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /still running/);
  assert.match(result.stdout + result.stderr, /ledger commit failed/);
});

test('an unconfirmed flush no caller awaited yet (a failed sync after a failed commit) is logged and the process goes on', () => {
  const result = withGuard(`
    const { UnconfirmedFlushError } = await import('./hook-runner/lmdb-commit-failure.ts');
    Promise.reject(new UnconfirmedFlushError(new Error('Input/output error')));
  `);
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /still running/);
  assert.match(result.stdout + result.stderr, /Input\/output error/);
});

test('a stray write refused below the disk floor is not logged (the floor logs its own line) and the process goes on', () => {
  const result = withGuard(`
    const { DiskSpaceLowError } = await import('./hook-runner/disk-floor.ts');
    Promise.reject(new DiskSpaceLowError(1, 2));
  `);
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /still running/);
  assert.equal(result.stderr, '');
});

test('a burst of strays (a full disk under load) logs the first, then one per interval with the count held back', () => {
  const script = `
    import { guardLedgerCommitFailures } from './runtime/ledger/commit-failure-guard.ts';
    import { STRAY_LOG_INTERVAL_MS } from './hook-runner/lmdb-commit-failure.ts';
    let now = 0;
    const logged = [];
    guardLedgerCommitFailures({ error: (message, fields) => logged.push(fields.more_since_last_logged ?? 0), warn() {}, info() {}, debug() {} }, () => now);
    const stray = () => Promise.reject(Object.assign(new Error('Commit failed (see commitError for details)'), { commitError: Promise.resolve() }));
    const turn = () => new Promise((resolve) => setTimeout(resolve, 5));
    for (let i = 0; i < 50; i++) stray();
    await turn();
    now += STRAY_LOG_INTERVAL_MS;
    stray();
    await turn();
    process.stdout.write(JSON.stringify(logged));
  `;
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });
  assert.equal(child.status, 0, child.stderr);
  assert.deepEqual(JSON.parse(child.stdout), [0, 49], 'the first of 50 logged, the other 49 counted in the next line, an interval later');
});

test('strays of one failed commit count once: the line an interval later counts the commits held back, not their strays', () => {
  // Each failed write leaves more than one stray (its own rejection and lmdb-js's), all carrying its
  // commit's promise: a metrics probe read more_since_last_logged at twice the writes that failed.
  const script = `
    import { mkdtempSync } from 'node:fs';
    import { tmpdir } from 'node:os';
    import { join } from 'node:path';
    import { STRAY_LOG_INTERVAL_MS } from './hook-runner/lmdb-commit-failure.ts';
    import { guardLedgerCommitFailures } from './runtime/ledger/commit-failure-guard.ts';
    import { durably } from './runtime/ledger/durable-write.ts';
    import { openLedger } from './runtime/ledger/open-ledger.ts';
    let now = 0;
    const logged = [];
    guardLedgerCommitFailures({ error: (message, fields) => logged.push(fields.more_since_last_logged ?? 0), warn() {}, info() {}, debug() {} }, () => now);
    const ledger = openLedger(mkdtempSync(join(tmpdir(), 'sluice-strays-')));
    // Lines come once a commit's own promise settles: waits for the nth, then a turn for its other strays.
    const turn = () => new Promise((resolve) => setTimeout(resolve, 10));
    const lines = async (n) => {
      for (let i = 0; i < 2000 && logged.length < n; i++) await turn();
      await turn();
    };
    let failed = 0;
    for (let i = 0; i < 20000 && failed === 0; i++) {
      try { await durably(ledger.root, ledger.events.put(['org', 'e' + i], 'x'.repeat(1024))); } catch { failed++; }
    }
    await lines(1);
    now += STRAY_LOG_INTERVAL_MS;
    try { await durably(ledger.root, ledger.events.put(['org', 'late'], 'x'.repeat(1024))); } catch { failed++; }
    await lines(2);
    await ledger.close();
    process.stdout.write(JSON.stringify({ failed, logged }));
  `;
  const child = spawnSync('bash', underFileSizeLimit(2048, [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script]), { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  assert.equal(child.status, 0, `${child.stdout}\n${child.stderr}`);
  assert.deepEqual(JSON.parse(child.stdout), { failed: 2, logged: [0, 0] }, 'two failed commits, one line each, nothing held back between them');
});

test('any other unhandled rejection still ends the process', () => {
  const result = withGuard(`Promise.reject(new Error('a real bug'));`);
  assert.notEqual(result.status, 0);
  assert.doesNotMatch(result.stdout, /still running/);
  assert.match(result.stderr, /a real bug/);
});

test('recognises lmdb-js commit failures and writes refused below the disk floor only', () => {
  assert.equal(isFailedWrite(Object.assign(new Error('Commit failed'), { commitError: Promise.resolve() })), true);
  assert.equal(isFailedWrite(new DiskSpaceLowError(1, 2)), true);
  assert.equal(isFailedWrite(new Error('unrelated')), false);
  const throughLmdb = Object.assign(new TypeError('a bug in a transaction callback'), { stack: 'TypeError: x\n    at transactionSync (file:///app/node_modules/lmdb/write.js:900:5)' });
  assert.equal(isFailedWrite(throughLmdb), false, 'passing through lmdb-js is not enough');
  assert.equal(isFailedWrite('a string'), false);
});

test('a disk that fills (here a 2 MiB file-size limit) fails the writes, not the process: they fail one by one and reads are still answered', () => {
  // Every write is handled by its caller, as the runtime's are; the commit's own rejection, which
  // lmdb-js gives no holder, must be settled by the ledger, or the first failed commit ends the process.
  const script = `
    import { mkdtempSync } from 'node:fs';
    import { tmpdir } from 'node:os';
    import { join } from 'node:path';
    import { guardLedgerCommitFailures } from './runtime/ledger/commit-failure-guard.ts';
    import { durably } from './runtime/ledger/durable-write.ts';
    import { openLedger } from './runtime/ledger/open-ledger.ts';
    import { createLogger } from './runtime/log.ts';
    guardLedgerCommitFailures(createLogger('silent'));
    const ledger = openLedger(mkdtempSync(join(tmpdir(), 'sluice-full-')));
    let stored = 0, failed = 0;
    for (let i = 0; i < 20000 && failed < 5; i++) {
      try { await durably(ledger.root, ledger.events.put(['org', 'e' + i], 'x'.repeat(1024))); stored++; } catch { failed++; }
    }
    const read = ledger.events.get(['org', 'e0'])?.length;
    // Closed before the answer: the close waits out the failed commits' flushes and lmdb-js's last
    // batch, so every rejection they make has been made (and, unsettled, would have ended the process).
    await ledger.close();
    process.stdout.write(JSON.stringify({ stored, failed, read }));
  `;
  const child = spawnSync('bash', underFileSizeLimit(2048, [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script]), { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  assert.equal(child.status, 0, `${child.stdout}\n${child.stderr}`);
  const outcome = JSON.parse(child.stdout) as { stored: number; failed: number; read: number };
  assert.ok(outcome.stored > 100, `writes were stored before the disk filled: ${child.stdout}`);
  assert.equal(outcome.failed, 5, 'and failed once it had');
  assert.equal(outcome.read, 1024, 'reads still answered');
});

test('a failure whose cause is a failed commit is logged at debug (the guard speaks for it), any other at error; a device message it refused is nacked write_failed', () => {
  const lines: string[] = [];
  const logger = { error: (message: string) => lines.push(`error ${message}`), warn() {}, info() {}, debug: (message: string) => lines.push(`debug ${message}`) };
  const commitFailure = Object.assign(new Error('Commit failed (see commitError for details)'), { commitError: Promise.resolve() });
  logFailure(logger, 'device message could not be stored', { device: 'meter' }, commitFailure);
  logFailure(logger, 'device message could not be stored', { device: 'meter' }, new TypeError('x is undefined'));
  assert.deepEqual(lines, ['debug device message could not be stored', 'error device message could not be stored']);
  const nack = JSON.parse(nackFrame('m-1', commitFailure)) as { error: { code: string }; retryable: boolean; retry_after_ms: number };
  assert.deepEqual([nack.error.code, nack.retryable, nack.retry_after_ms], ['write_failed', true, 5000]);
});
