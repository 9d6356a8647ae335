// The guard against lmdb-js's stray rejections for a failed commit, in a real child process: such a
// rejection is logged and the process goes on; any other unhandled rejection still ends it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { isLedgerCommitFailure } from '../../runtime/ledger/commit-failure-guard.ts';

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

test('any other unhandled rejection still ends the process', () => {
  const result = withGuard(`Promise.reject(new Error('a real bug'));`);
  assert.notEqual(result.status, 0);
  assert.doesNotMatch(result.stdout, /still running/);
  assert.match(result.stderr, /a real bug/);
});

test('recognises lmdb-js commit failures only', () => {
  assert.equal(isLedgerCommitFailure(Object.assign(new Error('Commit failed'), { commitError: Promise.resolve() })), true);
  assert.equal(isLedgerCommitFailure(new Error('unrelated')), false);
  const throughLmdb = Object.assign(new TypeError('a bug in a transaction callback'), { stack: 'TypeError: x\n    at transactionSync (file:///app/node_modules/lmdb/write.js:900:5)' });
  assert.equal(isLedgerCommitFailure(throughLmdb), false, 'passing through lmdb-js is not enough');
  assert.equal(isLedgerCommitFailure('a string'), false);
});
