// FlushWatch: lmdb-js never settles a failed batch's flush promise. When a commit fails, a wait
// whose own write failed ends with that failure, the others once a sync has put what is committed
// on disk; until a write issued after the failure commits, every new wait syncs too. A failed
// commit LMDB had already made visible failed in its own sync: its write took (write_unconfirmed),
// and from then on every wait ends unconfirmed and the owner is told once.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FlushWatch } from '../../hook-runner/flush-watch.ts';
import { tookUnsynced, UnconfirmedFlushError } from '../../hook-runner/lmdb-commit-failure.ts';
import { failedWriteError } from '../../runtime/ledger/commit-failure-guard.ts';

/** A write failed at commit, as lmdb-js rejects one: its error carries the commit's own promise, rejected with LMDB's reason. */
const failedCommit = (cause = 'Commit failed'): Promise<never> => {
  const commitError = Promise.reject(new Error(cause));
  commitError.catch(() => undefined);
  const failure = Promise.reject(Object.assign(new Error('MDB_EFBIG'), { commitError }));
  failure.catch(() => undefined);
  return failure;
};
const dead = (): Promise<void> => new Promise<void>(() => undefined);
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** 'flushed' if `wait` ends within a second, else 'hung'. */
const within = (wait: PromiseLike<unknown>): Promise<string> => Promise.race([Promise.resolve(wait).then(() => 'flushed'), new Promise<string>((resolve) => setTimeout(() => resolve('hung'), 1000))]);
/** A source's commit ids that never move: every failed commit is one LMDB did not make visible (a page write failed). */
const stillTxns = { visibleTxnId: () => 7, onCommitEnded: () => undefined };
/** A FlushSource whose flush never settles (a failed batch's), counting the syncs asked for. */
const deadSource = () => {
  const source = { syncs: 0, flushed: dead, sync: (done: (error?: unknown) => void) => void (source.syncs++, setImmediate(done)), ...stillTxns };
  return source;
};

test('when a commit fails, a wait whose own write failed ends with that failure; a failure of another kind ends nothing', async () => {
  const source = deadSource();
  const watch = new FlushWatch(source);
  let settled = false;
  watch.flushed().then(() => (settled = true), () => (settled = true));
  const notACommit = Promise.reject(new Error('the transaction body threw'));
  notACommit.catch(() => undefined);
  watch.watch(notACommit);
  await turn();
  assert.deepEqual([settled, source.syncs], [false, 0], 'a write that failed before its commit says nothing of the disk');
  const write = watch.watch(Object.assign(failedCommit(), { flushed: dead() }));
  const waiting = write.flushed;
  await assert.rejects(write, /MDB_EFBIG/);
  await assert.rejects(waiting, /MDB_EFBIG/);
  assert.equal(failedWriteError('request', await write.catch((error: unknown) => error))?.code, 'write_failed', 'a commit LMDB never made visible kept nothing');
});

test('when another commit fails, waits whose write committed, or that wait for what is committed, end once a sync has put it on disk', async () => {
  // Answering them with the failure said "nothing was kept" of events that were stored: sent again, they were stored twice.
  const source = deadSource();
  const watch = new FlushWatch(source);
  const committed = watch.watch(Object.assign(Promise.resolve('event stored'), { flushed: dead() }));
  const ownFlush = committed.flushed;
  const whatIsCommitted = watch.flushed();
  let commitLater = (): void => undefined;
  const later = watch.watch(Object.assign(new Promise<void>((resolve) => (commitLater = resolve)), { flushed: dead() }));
  const laterFlush = later.flushed;
  watch.watch(failedCommit());
  await turn();
  assert.equal(await within(ownFlush), 'flushed');
  assert.equal(await within(whatIsCommitted), 'flushed');
  assert.equal(source.syncs, 2, 'the write still out is synced for once it commits');
  commitLater();
  assert.equal(await within(laterFlush), 'flushed');
  assert.equal(source.syncs, 3);
});

test('a sync that fails ends the waits with UnconfirmedFlushError: what took may not be on disk', async () => {
  const source = { flushed: dead, sync: (done: (error?: unknown) => void) => void setImmediate(() => done(new Error('EIO'))), ...stillTxns };
  const watch = new FlushWatch(source);
  const committed = watch.watch(Object.assign(Promise.resolve('event stored'), { flushed: dead() }));
  const ownFlush = committed.flushed;
  watch.watch(failedCommit());
  await assert.rejects(ownFlush, (error: unknown) => error instanceof UnconfirmedFlushError && /EIO/.test(error.message));
  assert.equal(failedWriteError('request', await ownFlush.catch((error: unknown) => error))?.code, 'write_unconfirmed');
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

test('after a failed commit, a write issued meanwhile is synced for once it has committed, not before (a sync before would not cover it)', async () => {
  const source = deadSource();
  const watch = new FlushWatch(source);
  watch.watch(failedCommit());
  await turn();
  let commit = (): void => undefined;
  const write = watch.watch(Object.assign(new Promise<void>((resolve) => (commit = resolve)), { flushed: dead() }));
  const ownFlush = write.flushed;
  await turn();
  assert.equal(source.syncs, 0, 'no sync while the write is out');
  commit();
  assert.equal(await within(ownFlush), 'flushed');
  assert.equal(source.syncs, 1);
});

test('the writes of one failed batch, each rejected, set a wait on its way once: one sync, not one per rejected write', async () => {
  const source = deadSource();
  const watch = new FlushWatch(source);
  const committed = watch.watch(Object.assign(Promise.resolve('event stored'), { flushed: dead() }));
  const ownFlush = committed.flushed;
  for (let i = 0; i < 50; i++) watch.watch(failedCommit());
  assert.equal(await within(ownFlush), 'flushed');
  assert.equal(source.syncs, 1);
});

/**
 * A source whose commits are numbered as LMDB numbers them, each end told as lmdb-js tells it (in
 * order, before the commit's writes settle): `commit()` one that succeeds, `failAfterVisible()` one
 * whose own sync failed after LMDB made it visible, `failInvisible()` one whose pages were not
 * written, `emptyCommit()` an empty transaction (it reports the id it would have had).
 */
const numberedSource = (sync: (done: (error?: unknown) => void) => void) => {
  let visible = 40;
  let told = (_txnId: number | undefined): void => undefined;
  return {
    flushed: dead,
    sync,
    visibleTxnId: () => visible,
    onCommitEnded: (listener: (txnId: number | undefined) => void) => void (told = listener),
    commit: () => told(++visible),
    failAfterVisible: () => {
      visible += 1;
      told(undefined);
    },
    failInvisible: () => told(undefined),
    emptyCommit: () => told(visible + 1),
  };
};

test('a failed commit LMDB had made visible failed in its own sync: its write took (write_unconfirmed), every wait ends unconfirmed from then on, even after a sync that says ok, and the owner is told once', async () => {
  const source = numberedSource((done) => void setImmediate(done));
  const told: string[] = [];
  const watch = new FlushWatch(source, (cause) => told.push(cause));
  const committed = watch.watch(Object.assign(Promise.resolve('event stored'), { flushed: dead() }));
  source.commit();
  const ownFlush = committed.flushed;
  const whatIsCommitted = watch.flushed();
  source.failAfterVisible();
  const failed = watch.watch(failedCommit('Input/output error'));
  const error = await failed.catch((failure: unknown) => failure);
  assert.ok(tookUnsynced(error));
  assert.equal(failedWriteError('request', error)?.code, 'write_unconfirmed', 'it may be stored: not "nothing was kept"');
  await assert.rejects(ownFlush, (failure: unknown) => failure instanceof UnconfirmedFlushError && /Input\/output error/.test(failure.message));
  await assert.rejects(whatIsCommitted, UnconfirmedFlushError);
  // A later commit that succeeds, and a sync that says ok: neither is trusted (Linux may have dropped the unwritten pages).
  const later = watch.watch(Object.assign(Promise.resolve('later'), { flushed: Promise.resolve() }));
  source.commit();
  await later;
  await assert.rejects(later.flushed, UnconfirmedFlushError);
  await assert.rejects(watch.flushed(), UnconfirmedFlushError);
  source.failAfterVisible();
  await watch.watch(failedCommit('Input/output error')).catch(() => undefined);
  await turn();
  assert.deepEqual(told, ['Input/output error']);
});

test('a failed commit is told apart by the commits that succeeded: one not visible past the last of them kept nothing, and nothing else changes', async () => {
  const source = numberedSource((done) => void setImmediate(done));
  const told: string[] = [];
  const watch = new FlushWatch(source, (cause) => told.push(cause));
  await watch.watch(Promise.resolve('first'));
  source.commit();
  source.commit();
  source.failInvisible();
  const error = await watch.watch(failedCommit('Input/output error')).catch((failure: unknown) => failure);
  assert.equal(tookUnsynced(error), false);
  assert.equal(failedWriteError('request', error)?.code, 'write_failed');
  assert.equal(await within(watch.flushed()), 'flushed', 'waits sync as after any failed commit');
  assert.deepEqual(told, []);
});

test('a failed commit told apart when a later commit ends before its writes are rejected, or after an empty transaction reported the id it then took', async () => {
  for (const before of ['a later commit', 'an empty transaction'] as const) {
    const source = numberedSource((done) => void setImmediate(done));
    const told: string[] = [];
    const watch = new FlushWatch(source, (cause) => told.push(cause));
    const failed = watch.watch(failedCommit('Input/output error'));
    if (before === 'an empty transaction') {
      source.emptyCommit();
      source.failAfterVisible();
    } else {
      // lmdb-js settles both in one loop: the failure first, then the commit LMDB made after it.
      source.failAfterVisible();
      source.commit();
    }
    const error = await failed.catch((failure: unknown) => failure);
    assert.equal(failedWriteError('request', error)?.code, 'write_unconfirmed', before);
    await turn();
    assert.deepEqual(told, ['Input/output error'], before);
  }
  // An empty transaction's id is not taken for a commit: a failure after it that left nothing visible kept nothing.
  const source = numberedSource((done) => void setImmediate(done));
  const watch = new FlushWatch(source);
  source.emptyCommit();
  source.failInvisible();
  assert.equal(failedWriteError('request', await watch.watch(failedCommit('Input/output error')).catch((failure: unknown) => failure))?.code, 'write_failed');
});
