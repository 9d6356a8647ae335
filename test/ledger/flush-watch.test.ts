// FlushWatch: a wait for the ledger's flush ends with a commit failure seen meanwhile (lmdb-js never
// settles a failed batch's flush promise), and after a failed commit a wait starts a fresh batch first.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FlushWatch } from '../../runtime/ledger/flush-watch.ts';

/** A write failed at commit, as lmdb-js rejects one: its error carries the commit's own promise. */
const failedCommit = (): Promise<never> => {
  const commitError = Promise.reject(new Error('Commit failed'));
  commitError.catch(() => undefined);
  const failure = Promise.reject(Object.assign(new Error('MDB_EFBIG'), { commitError }));
  failure.catch(() => undefined);
  return failure;
};

test('a wait on a flush that never settles ends with the commit failure seen meanwhile; a failure of another kind does not end it', async () => {
  const never = new Promise<void>(() => undefined);
  let fresh = 0;
  const watch: FlushWatch = new FlushWatch(() => never, async () => void fresh++);
  const waiting = watch.flushed();
  let settled = false;
  waiting.then(() => (settled = true), () => (settled = true));
  const notACommit = Promise.reject(new Error('the transaction body threw'));
  notACommit.catch(() => undefined);
  watch.watch(notACommit);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(settled, false, 'a write that failed before its commit says nothing of the disk');
  watch.watch(failedCommit());
  await assert.rejects(waiting, /MDB_EFBIG/);
  assert.equal(fresh, 0);
});

test('after a failed commit, a wait first commits a fresh batch (the flush on offer may be the dead one); a later success clears that', async () => {
  let flushes = 0;
  let fresh = 0;
  const watch: FlushWatch = new FlushWatch(async () => void flushes++, async () => void fresh++);
  watch.watch(failedCommit());
  await new Promise((resolve) => setImmediate(resolve));
  await watch.flushed();
  assert.deepEqual([fresh, flushes], [1, 1]);
  await watch.watch(Promise.resolve('committed'));
  await watch.flushed();
  assert.deepEqual([fresh, flushes], [1, 2], 'no fresh batch once a commit succeeded');
});
