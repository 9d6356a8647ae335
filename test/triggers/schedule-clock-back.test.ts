// A wall clock set back while Sluice runs (an NTP correction of a host clock that ran a year
// ahead): a running schedule sends the tick owed at the new time at once and goes on hourly from
// there, as a restart would, instead of waiting a year for the time its timer was armed for. A
// schedule that started while the clock ran ahead owes no tick from before the correction.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { startClockedSchedules, type ClockedSchedules } from '../helpers/clocked-schedules.ts';

const AHEAD = Date.UTC(2027, 10, 30, 9, 0, 0);
const CORRECT = Date.UTC(2026, 10, 30, 10, 30, 0);
const HOUR = 3_600_000;
const ORG = 'acct-clock-back';
let s: ClockedSchedules;

before(async () => {
  s = await startClockedSchedules(ORG, AHEAD);
});
after(async () => s.close());

const sentTicks = (): Promise<string[]> => s.ticksOf('report.hourly');
const lookAt = (at: number): number => s.lookAt(at);

test('a clock set back sends the tick owed at the new time at once, then the next ones on time', async () => {
  const created = await call(s.url, 'POST', `/organizations/${ORG}/schedules`, { token: s.key, json: { name: 'hourly', cron: '0 * * * *', event_type: 'report.hourly' } });
  assert.equal(created.status, 201, created.text);
  assert.equal(lookAt(AHEAD + HOUR), 1);
  await eventually('the tick of the clock that ran ahead', sentTicks, (ticks) => ticks.length === 1);
  await eventually('its next tick to be armed', () => s.runtime.ticker.timers.dueAt(`${ORG}\u0000hourly`), (at) => at === AHEAD + 2 * HOUR);

  assert.equal(lookAt(CORRECT), 1, 'the 10:00 tick of the corrected clock is due at once');
  await eventually('the owed tick', sentTicks, (ticks) => ticks.length === 2);
  await eventually('the next tick to be armed', () => s.runtime.ticker.timers.dueAt(`${ORG}\u0000hourly`), (at) => at === CORRECT + HOUR / 2);
  assert.equal(lookAt(CORRECT + HOUR / 2 - 1000), 0, 'not before 11:00');
  assert.equal(lookAt(CORRECT + HOUR / 2), 1);
  const ticks = await eventually('the 11:00 tick', sentTicks, (list) => list.length === 3);
  assert.deepEqual(ticks, ['2026-11-30T10:00:00.000Z', '2026-11-30T11:00:00.000Z', '2027-11-30T10:00:00.000Z']);
});

test('a schedule created while the clock ran far ahead owes nothing from before the correction: it starts from the corrected time', async () => {
  const freshTicks = (): Promise<string[]> => s.ticksOf('report.fresh');
  assert.equal((await call(s.url, 'DELETE', `/organizations/${ORG}/schedules/hourly`, { token: s.key })).status, 204, 'only this schedule has a timer');
  lookAt(AHEAD + 2 * HOUR + 600_000);
  const created = await call(s.url, 'POST', `/organizations/${ORG}/schedules`, { token: s.key, json: { name: 'fresh', cron: '0 * * * *', event_type: 'report.fresh' } });
  assert.equal(created.status, 201, created.text);

  assert.equal(lookAt(CORRECT + HOUR), 1, 'the corrected clock owes the 11:00 tick of a schedule whose start it cannot place');
  await eventually('the 11:00 tick to be passed over', () => s.runtime.ticker.timers.dueAt(`${ORG}\u0000fresh`), (at) => at === CORRECT + 1.5 * HOUR);
  assert.deepEqual(await freshTicks(), [], 'no tick from before the schedule existed');
  const shown = await call(s.url, 'GET', `/organizations/${ORG}/schedules/fresh`, { token: s.key });
  assert.deepEqual([shown.body.schedule.last_sent_tick_at, shown.body.schedule.next_tick_at], [null, '2026-11-30T12:00:00.000Z']);

  assert.equal(lookAt(CORRECT + 1.5 * HOUR), 1);
  assert.deepEqual(await eventually('the 12:00 tick', freshTicks, (ticks) => ticks.length === 1), ['2026-11-30T12:00:00.000Z']);
});

test('a schedule whose start a slow clock passed over sends no tick from before that start once the clock is right again', async () => {
  const laterTicks = (): Promise<string[]> => s.ticksOf('report.later');
  assert.equal((await call(s.url, 'DELETE', `/organizations/${ORG}/schedules/fresh`, { token: s.key })).status, 204, 'only this schedule has a timer');
  const start = CORRECT + 1.5 * HOUR + 600_000; // 12:10
  lookAt(start);
  const created = await call(s.url, 'POST', `/organizations/${ORG}/schedules`, { token: s.key, json: { name: 'later', cron: '0 * * * *', event_type: 'report.later' } });
  assert.equal(created.status, 201, created.text);

  lookAt(start - 2 * HOUR); // set back to 10:10: the 10:00 tick of a schedule "made" at 12:10 is passed over
  await eventually('the 10:00 tick to be passed over', () => s.runtime.ticker.timers.dueAt(`${ORG}\u0000later`), (at) => at === CORRECT + 0.5 * HOUR);
  lookAt(start + 60_000); // right again at 12:11: the 12:00 tick is from before the schedule started
  await eventually('the next tick to be armed', () => s.runtime.ticker.timers.dueAt(`${ORG}\u0000later`), (at) => at === CORRECT + 2.5 * HOUR);
  assert.deepEqual(await laterTicks(), []);
  lookAt(CORRECT + 2.5 * HOUR);
  assert.deepEqual(await eventually('the 13:00 tick', laterTicks, (ticks) => ticks.length === 1), ['2026-11-30T13:00:00.000Z']);
});

test('once a schedule has sent a tick, a set back of more than an hour to before its start is trusted as before: the owed tick is sent', async () => {
  const laterTicks = (): Promise<string[]> => s.ticksOf('report.later');
  // The 13:00 tick's event is listed a moment before its schedule is armed again (for 14:00).
  await eventually('the 14:00 tick to be armed', () => s.runtime.ticker.timers.dueAt(`${ORG}\u0000later`), (at) => at === CORRECT + 3.5 * HOUR);
  assert.equal(lookAt(CORRECT + 3.5 * HOUR), 1);
  await eventually('the 14:00 tick', laterTicks, (ticks) => ticks.length === 2);
  lookAt(CORRECT + 4 * HOUR); // 14:30
  // Back to 11:30, before the schedule's start mark (12:10): the 11:00 tick is sent at once, and 12:00 on time.
  assert.equal(lookAt(CORRECT + HOUR), 1);
  await eventually('the 11:00 tick', laterTicks, (ticks) => ticks.length === 3);
  const shown = await call(s.url, 'GET', `/organizations/${ORG}/schedules/later`, { token: s.key });
  assert.equal(shown.body.schedule.next_tick_at, '2026-11-30T12:00:00.000Z');
  await eventually('the 12:00 tick to be armed', () => s.runtime.ticker.timers.dueAt(`${ORG}\u0000later`), (at) => at === CORRECT + 1.5 * HOUR);
  assert.equal(lookAt(CORRECT + 1.5 * HOUR), 1);
  assert.deepEqual(await eventually('the 12:00 tick', laterTicks, (ticks) => ticks.length === 4), ['2026-11-30T11:00:00.000Z', '2026-11-30T12:00:00.000Z', '2026-11-30T13:00:00.000Z', '2026-11-30T14:00:00.000Z']);
  // 13:00 was sent before the set back: its event is there, so it is not sent again, and the schedule says it was sent.
  await eventually('the 13:00 tick to be armed', () => s.runtime.ticker.timers.dueAt(`${ORG}\u0000later`), (at) => at === CORRECT + 2.5 * HOUR);
  assert.equal(lookAt(CORRECT + 2.5 * HOUR), 1);
  const looked = await eventually('the 14:00 tick to be next', async () => (await call(s.url, 'GET', `/organizations/${ORG}/schedules/later`, { token: s.key })).body.schedule, (schedule) => schedule.next_tick_at === '2026-11-30T14:00:00.000Z');
  assert.equal(looked.last_sent_tick_at, '2026-11-30T13:00:00.000Z');
  assert.equal((await laterTicks()).length, 4, 'nothing sent twice');
});
