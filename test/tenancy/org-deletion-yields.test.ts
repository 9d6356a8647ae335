// An org deleted with many unfinished runs lets go of them over several event-loop turns, not in
// one (60,000 in one turn held every other org's requests ~1.3 s), and none of them is admitted
// meanwhile: its runs leave the scheduler at once. Another org's run is admitted and completes. A
// runtime stopped part way leaves a data dir whose next start picks none of them up.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { RECOVERY_BATCH } from '../../runtime/runs/run-recovery.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';
import { rmSync } from 'node:fs';
import { silentListener, type SilentListener } from '../helpers/silent-listener.ts';

const BIG = 'acct-yield-big';
const OTHER = 'acct-yield-other';
let rt: TestRuntime;
let receiver: SilentListener;

before(async () => {
  rt = await startRuntime();
  receiver = await silentListener();
});
after(async () => {
  await rt.close();
  await receiver.close();
});

/** Creates a workflow of `steps` on `event` in `on`, then sends `count` events of it, 32 at a time. */
async function runsOf(on: TestRuntime, org: string, key: string, event: string, steps: unknown[], count: number): Promise<void> {
  const made = await call(on.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: event, trigger_event: event, steps } });
  assert.equal(made.status, 201, made.text);
  let next = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < count) {
      next++;
      const sent = await call(on.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: event, payload: {} } });
      assert.equal(sent.status, 202, sent.text);
    }
  }));
}

test('a deleted org with many delayed runs lets go of their timers over several turns, and admits none of its queued runs', async () => {
  const bigKey = await createOrg(rt.url, ADMIN_TOKEN, BIG);
  const delayed = 2 * RECOVERY_BATCH + 100;
  await runsOf(rt, BIG, bigKey, 'wait.long', [{ id: 'wait', type: 'delay', duration: 'PT1H' }], delayed);
  await eventually('every run waits in its delay', () => rt.runtime.engine.timers.size, (size) => size === delayed, 30_000);
  // One run holds the org's only slot (its receiver never answers); the other four wait for it and
  // must never be admitted once the org is deleted.
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${BIG}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 1 } })).status, 200);
  await runsOf(rt, BIG, bigKey, 'held.back', [{ id: 'post', type: 'webhook', url: `http://127.0.0.1:${receiver.port}/held` }], 5);
  await eventually('the first run\'s request reaches the receiver', () => receiver.requests(), (count) => count === 1);

  const sizes: number[] = [];
  let watching = true;
  const watch = (): void => {
    sizes.push(rt.runtime.engine.timers.size);
    if (watching) setImmediate(watch);
  };
  setImmediate(watch);
  const deleted = await call(rt.url, 'DELETE', `/organizations/${BIG}`, { token: ADMIN_TOKEN });
  assert.equal(deleted.status, 202, deleted.text);
  await eventually('every timer of the deleted org is disarmed', () => rt.runtime.engine.timers.size, (size) => size === 0);
  watching = false;
  const between = sizes.filter((size) => size > 0 && size < delayed);
  assert.ok(between.length > 0, `some turn saw part of the timers gone (sizes seen: ${[...new Set(sizes)].join(', ')})`);

  const otherKey = await createOrg(rt.url, ADMIN_TOKEN, OTHER);
  await runsOf(rt, OTHER, otherKey, 'quick.one', [{ id: 'wait', type: 'delay', duration_ms: 1 }], 1);
  await eventually("another org's run is admitted and completes", async () => (await call(rt.url, 'GET', `/organizations/${OTHER}/runs`, { token: otherKey })).body?.runs?.[0]?.state, (state) => state === 'completed');
  assert.equal(receiver.requests(), 1, 'none of the deleted org\'s queued runs was admitted and sent');
});

test('a runtime stopped while it lets go of a deleted org\'s runs: a start on its data dir picks none of them up and finishes the removal', async () => {
  const dataDir = tempDir();
  let stopping: TestRuntime | undefined = await startRuntime({ dataDir });
  try {
    const key = await createOrg(stopping.url, ADMIN_TOKEN, BIG);
    await runsOf(stopping, BIG, key, 'wait.long', [{ id: 'wait', type: 'delay', duration: 'PT1H' }], 2 * RECOVERY_BATCH + 100);
    assert.equal((await call(stopping.url, 'DELETE', `/organizations/${BIG}`, { token: ADMIN_TOKEN })).status, 202);
    assert.ok(stopping.runtime.engine.timers.size > 0, 'stopped before every timer was let go of');
    await stopping.close();
    stopping = undefined;
    const again = await startRuntime({ dataDir });
    try {
      assert.equal(again.runtime.engine.timers.size, 0, "no timer of the deleted org's runs");
      await eventually('the deletion finished after the start', async () => (await call(again.url, 'GET', `/organizations/${BIG}/deletion`, { token: ADMIN_TOKEN })).body.deletion.state, (state) => state === 'removed', 30_000);
    } finally {
      await again.close();
    }
  } finally {
    await stopping?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
