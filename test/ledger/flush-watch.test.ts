// FlushWatch: a wait for an LMDB flush ends with a commit failure seen meanwhile (lmdb-js never
// settles a failed batch's flush promise), and after a failed commit, until a write issued after it
// commits, a wait also ends once a sync has put what is committed on disk.

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
const dead = (): Promise<void> => new Promise<void>(() => undefined);
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** 'flushed' if `wait` ends within a second, else 'hung'. */
const within = (wait: PromiseLike<unknown>): Promise<string> => Promise.race([Promise.resolve(wait).then(() => 'flushed'), new Promise<string>((resolve) => setTimeout(() => resolve('hung'), 1000))]);
/** A FlushSource whose flush never settles (a failed batch's), counting the syncs asked for. */
const deadSource = () => {
  const source = { syncs: 0, flushed: dead, sync: (done: (error?: unknown) => void) => void (source.syncs++, setImmediate(done)) };
  return source;
};

test('a wait on a flush that never settles ends with the commit failure seen meanwhile; a failure of another kind does not end it', async () => {
  const source = deadSource();
  const watch = new FlushWatch(source);
  const waiting = watch.flushed();
  let settled = false;
  waiting.then(() => (settled = true), () => (settled = true));
  const notACommit = Promise.reject(new Error('the transaction body threw'));
  notACommit.catch(() => undefined);
  watch.watch(notACommit);
  await turn();
  assert.equal(settled, false, 'a write that failed before its commit says nothing of the disk');
  watch.watch(failedCommit());
  await assert.rejects(waiting, /MDB_EFBIG/);
  assert.equal(source.syncs, 0, 'no sync while no commit had failed');
});

test('after a failed commit a wait on a dead flush ends with a sync; a write issued after the failure that commits ends the suspicion', async () => {
  const source = deadSource();
  const watch = new FlushWatch(source);
  watch.watch(failedCommit());
  await turn();
  assert.equal(await within(watch.flushed()), 'flushed');
  assert.equal(source.syncs, 1);
  await watch.watch(Promise.resolve('a later commit'));
  await turn();
  assert.equal(await within(watch.flushed()), 'hung', 'the flush is trusted again: no sync');
  assert.equal(source.syncs, 1);
});

test('outcomes settle out of issue order: a commit issued before the failure, settling after it, does not end the suspicion', async () => {
  // lmdb-js settles a transaction a microtask after a put: a commit can settle after the next batch's failure.
  const source = deadSource();
  const watch = new FlushWatch(source);
  let commitOlder = (): void => undefined;
  watch.watch(new Promise<void>((resolve) => (commitOlder = resolve)));
  watch.watch(failedCommit());
  await turn();
  commitOlder();
  await turn();
  assert.equal(await within(watch.flushed()), 'flushed');
  assert.equal(source.syncs, 1);
});

test('a write\'s own flush, shared with a batch that then failed, is waited for the same way', async () => {
  const source = deadSource();
  const watch = new FlushWatch(source);
  // Committed, but its batch's flush promise is the one the next (failed) commit never settles.
  const committed = watch.watch(Object.assign(Promise.resolve('key stored'), { flushed: dead() }));
  watch.watch(failedCommit());
  await turn();
  assert.equal(await committed, 'key stored');
  assert.equal(await within(committed.flushed), 'flushed');
});
