// The limiter in front of the compile thread (and the guest slots): arrival order, `first` tasks
// ahead of the others, but at most FIRST_IN_A_ROW of them while another task waits.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRunLimiter, FIRST_IN_A_ROW } from '../../hook-runner/thread-pool.ts';

/** A task that records its start and ends when the test says. */
function controlled(started: string[], name: string) {
  let end!: () => void;
  const done = new Promise<void>((resolve) => (end = resolve));
  return { task: async () => { started.push(name); await done; }, end };
}

test('first tasks go ahead of earlier ones, but a waiting task goes after FIRST_IN_A_ROW of them', async () => {
  const limiter = createRunLimiter(1);
  const started: string[] = [];
  const blocker = controlled(started, 'blocker');
  const running = [limiter.run(blocker.task)];
  const upload = controlled(started, 'upload');
  running.push(limiter.run(upload.task));
  const firsts = Array.from({ length: FIRST_IN_A_ROW + 2 }, (_, i) => controlled(started, `first-${i}`));
  for (const first of firsts) running.push(limiter.run(first.task, true));
  assert.deepEqual(limiter.queued, FIRST_IN_A_ROW + 3);
  // End whichever task holds the slot, one at a time, and see the order they started in.
  const ends = new Map([['blocker', blocker.end], ['upload', upload.end], ...firsts.map((f, i) => [`first-${i}`, f.end] as const)]);
  for (let i = 0; i < FIRST_IN_A_ROW + 3; i++) {
    ends.get(started.at(-1)!)!();
    await new Promise((resolve) => setImmediate(resolve));
  }
  ends.get(started.at(-1)!)!();
  await Promise.all(running);
  const order = started.slice(1);
  assert.equal(order.indexOf('upload'), FIRST_IN_A_ROW, `the upload went after ${FIRST_IN_A_ROW} first tasks: ${order.join(', ')}`);
  assert.deepEqual(order.filter((name) => name !== 'upload'), firsts.map((_, i) => `first-${i}`), 'first tasks keep their own order');
  assert.deepEqual([limiter.active, limiter.queued], [0, 0]);
});

test('tenants take turns for the compile thread: one tenant\'s queued compiles hold another\'s back by one each, in both classes', async () => {
  const limiter = createRunLimiter(1);
  const started: string[] = [];
  const blocker = controlled(started, 'blocker');
  const running = [limiter.run(blocker.task)];
  const tasks = new Map([['blocker', blocker]]);
  const queue = (name: string, first: boolean, tenant: string) => {
    const task = controlled(started, name);
    tasks.set(name, task);
    running.push(limiter.run(task.task, first, tenant));
  };
  for (let i = 0; i < 3; i++) queue(`a-upload-${i}`, false, 'org_a');
  queue('b-upload', false, 'org_b');
  for (let i = 0; i < 3; i++) queue(`a-recompile-${i}`, true, 'org_a');
  queue('b-recompile', true, 'org_b');
  for (let i = 0; i < 8; i++) {
    tasks.get(started.at(-1)!)!.end();
    await new Promise((resolve) => setImmediate(resolve));
  }
  tasks.get(started.at(-1)!)!.end();
  await Promise.all(running);
  assert.deepEqual(started.slice(1), ['a-recompile-0', 'b-recompile', 'a-recompile-1', 'a-recompile-2', 'a-upload-0', 'b-upload', 'a-upload-1', 'a-upload-2']);
  assert.deepEqual([limiter.active, limiter.queued], [0, 0]);
});
