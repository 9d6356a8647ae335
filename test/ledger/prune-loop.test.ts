// The prune loop on Node's mocked timers: a first pass right after start (a runtime restarted more
// often than the interval still prunes), then one per interval; a pass still running is not
// started again over itself; a failing job is reported and the others still run; close waits for
// the pass in flight and no pass starts after it.

import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { startPruneLoop } from '../../runtime/ledger/prune-loop.ts';

const HOUR = 3_600_000;

test('a first pass at once, then one per interval, never two at a time; failures reported per job; close waits for the pass', async () => {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
  try {
    const calls: string[] = [];
    const failures: string[] = [];
    let release: () => void = () => undefined;
    let hold = false;
    const loop = startPruneLoop(
      {
        slow: async () => {
          calls.push('slow');
          if (hold) await new Promise<void>((resolve) => (release = resolve));
        },
        broken: async () => {
          calls.push('broken');
          throw new Error('disk full');
        },
      },
      HOUR,
      (job, error) => failures.push(`${job}: ${(error as Error).message}`),
    );
    mock.timers.tick(0);
    await new Promise(setImmediate);
    assert.deepEqual(calls, ['slow', 'broken'], 'the first pass runs at start, not an hour later');
    assert.deepEqual(failures, ['broken: disk full']);

    hold = true;
    mock.timers.tick(HOUR);
    await new Promise(setImmediate);
    assert.equal(calls.length, 4, 'the second pass at the interval');
    mock.timers.tick(HOUR);
    await new Promise(setImmediate);
    assert.equal(calls.length, 4, 'no pass over one still running');

    let closed = false;
    const closing = loop.close().then(() => (closed = true));
    await new Promise(setImmediate);
    assert.equal(closed, false, 'close waits for the pass in flight');
    release();
    await closing;
    mock.timers.tick(3 * HOUR);
    await new Promise(setImmediate);
    assert.equal(calls.length, 4, 'nothing after close');
  } finally {
    mock.timers.reset();
  }
});

test('close tells the jobs to stop and waits until they have', async () => {
  let passes = 0;
  let sawStop = false;
  const loop = startPruneLoop(
    {
      backlog: async (stop) => {
        // A long backlog: one batch per turn until told to stop.
        while (!stop.aborted) {
          passes++;
          await new Promise(setImmediate);
        }
        sawStop = true;
      },
    },
    HOUR,
    () => undefined,
  );
  while (passes < 3) await new Promise(setImmediate);
  await loop.close();
  assert.equal(sawStop, true, 'close resolved after the job saw the stop and ended');
});

test('passNow runs a pass after the one in flight and resolves once it has ended', async () => {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
  try {
    let passes = 0;
    let release: () => void = () => undefined;
    const loop = startPruneLoop(
      {
        job: async () => {
          passes++;
          await new Promise<void>((resolve) => (release = resolve));
        },
      },
      HOUR,
      () => undefined,
    );
    mock.timers.tick(0);
    await new Promise(setImmediate);
    assert.equal(passes, 1, 'the first pass, held');
    let done = false;
    const now = loop.passNow().then(() => (done = true));
    await new Promise(setImmediate);
    assert.equal(passes, 1, 'not over the pass in flight');
    release();
    await new Promise(setImmediate);
    assert.equal(passes, 2, 'its own pass, once the first ended');
    assert.equal(done, false, 'resolves only once that pass has ended');
    release();
    await now;
    await loop.close();
  } finally {
    mock.timers.reset();
  }
});
