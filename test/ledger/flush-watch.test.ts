// FlushWatch: a wait for the ledger's flush ends with a commit failure seen meanwhile (lmdb-js never
// settles a failed batch's flush promise), and after a failed commit a wait starts a fresh batch first.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FlushWatch } from '../../hook-runner/flush-watch.ts';

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

/** 'flushed' if `wait` ends within a second, else 'hung'. */
const within = (wait: Promise<void>): Promise<string> => Promise.race([wait.then(() => 'flushed'), new Promise<string>((resolve) => setTimeout(() => resolve('hung'), 1000).unref())]);

test('outcomes settle out of batch order: the newest write by issue decides, so a commit settling after a newer failure does not hide it', async () => {
  // lmdb-js settles a transaction one microtask after a put: a commit can settle after the next batch's failure.
  let current: PromiseLike<unknown> = new Promise(() => undefined);
  let fresh = 0;
  const watch: FlushWatch = new FlushWatch(() => current, async () => {
    fresh++;
    current = Promise.resolve();
  });
  let commitOlder = (): void => undefined;
  watch.watch(new Promise<void>((resolve) => (commitOlder = resolve)));
  watch.watch(failedCommit());
  await new Promise((resolve) => setImmediate(resolve));
  commitOlder();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(await within(watch.flushed()), 'flushed');
  assert.equal(fresh, 1, 'the failed batch is the newest settled: a fresh batch first');
});

test('a wait still on a dead flush follows the current one once a newer commit succeeds', async () => {
  let current: PromiseLike<unknown> = new Promise(() => undefined);
  const watch: FlushWatch = new FlushWatch(() => current, async () => undefined);
  watch.watch(failedCommit());
  await new Promise((resolve) => setImmediate(resolve));
  const waiting = watch.flushed();
  await new Promise((resolve) => setImmediate(resolve));
  current = Promise.resolve();
  watch.watch(Promise.resolve('a later commit'));
  assert.equal(await within(waiting), 'flushed');
});
