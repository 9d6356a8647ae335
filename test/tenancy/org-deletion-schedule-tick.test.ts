// A schedule tick whose write waited while its org was deleted: the org fence refuses the write, and
// the tick ends quietly, its timer not armed again. It was logged at error level ("schedule tick
// failed; trying again") and re-armed for 5 s, once per schedule being sent (found by a review).
// One refused while the deletion's mark was still being written, a mark that then failed, is tried
// again as after any failed write: the schedule had stopped for good (found by a review).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { capturedLog } from '../helpers/captured-log.ts';
import { call, createOrg } from '../helpers/http.ts';
import { deletionHeld, queuedWritesRun } from '../helpers/held-deletion.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-gone-mid-tick';

test('a tick whose write waited while its org was deleted ends without an error line or another try', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 1, 12, 0, 30));
  const { logger, lines } = capturedLog();
  const rt = await startRuntime({ args: ['--runner', 'off'], clock, logger });
  let gate: ReturnType<typeof gateNextCall> | undefined;
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/schedules`, { token: key, json: { name: 'minutely', cron: '* * * * *', event_type: 'minute.tick' } });
    assert.equal(created.status, 201, created.text);
    const { ticker } = rt.runtime;
    assert.equal(ticker.dueAt(ORG, 'minutely'), Date.UTC(2026, 10, 1, 12, 1));

    // The tick's transaction is held before it is issued, the org deleted meanwhile.
    gate = gateNextCall(rt.runtime.ledger.root, 'transaction');
    clock.advance(30_000);
    assert.equal(ticker.timers.fireDue(), 1);
    await gate.whenReached;
    assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}`, { token: ADMIN_TOKEN })).status, 202);
    gate.release();
    await ticker.idle();

    assert.equal(ticker.dueAt(ORG, 'minutely'), undefined, 'not armed again');
    assert.deepEqual(lines.filter((line) => line.level === 'error' || line.level === 'warn'), []);
  } finally {
    gate?.done();
    await rt.close();
  }
});

test('a tick refused while the deletion was written, a mark that then failed, is tried again and sent', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 1, 12, 0, 30));
  const rt = await startRuntime({ args: ['--runner', 'off'], clock });
  const gates: Array<{ done: () => void }> = [];
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/schedules`, { token: key, json: { name: 'minutely', cron: '* * * * *', event_type: 'minute.tick' } });
    assert.equal(created.status, 201, created.text);
    const { ticker } = rt.runtime;

    const tick = gateNextCall(rt.runtime.ledger.root, 'transaction');
    gates.push(tick);
    clock.advance(30_000);
    assert.equal(ticker.timers.fireDue(), 1);
    await tick.whenReached;
    // The mark is held before its write is issued (the org fenced off), then fails.
    const deletion = await deletionHeld(rt, ORG);
    gates.push(deletion);
    tick.release();
    // Once the writes queued before are over, the tick was refused.
    await queuedWritesRun(rt.runtime.ledger.root);
    deletion.release();
    assert.equal((await deletion.answer).status, 500);
    await ticker.idle();

    const retryAt = ticker.dueAt(ORG, 'minutely');
    assert.ok(retryAt !== undefined, 'armed again');
    clock.set(retryAt);
    ticker.timers.fireDue();
    await ticker.idle();
    const events = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=minute.tick`, { token: key });
    assert.deepEqual(events.body.events.map((event: { payload: { scheduled_for: string } }) => event.payload.scheduled_for), ['2026-11-01T12:01:00.000Z']);
  } finally {
    for (const gate of gates) gate.done();
    await rt.close();
  }
});
