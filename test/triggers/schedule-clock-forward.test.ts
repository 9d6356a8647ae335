// A wall clock stepped forward while Sluice runs (an NTP correction, a host resumed from suspend):
// as after a restart, of the ticks it jumped over only the newest is sent, once, when the ticker
// next looks (at least every minute), and the schedule goes on from there.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { startClockedSchedules, type ClockedSchedules } from '../helpers/clocked-schedules.ts';

const START = Date.UTC(2026, 10, 30, 9, 50, 0);
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const ORG = 'acct-clock-forward';
let s: ClockedSchedules;

before(async () => {
  s = await startClockedSchedules(ORG, START);
});
after(async () => s.close());

const ticksOf = (type: string): Promise<string[]> => s.ticksOf(type);
const lookAt = (at: number): number => s.lookAt(at);

const schedule = async (name: string, cron: string): Promise<void> => {
  const created = await call(s.url, 'POST', `/organizations/${ORG}/schedules`, { token: s.key, json: { name, cron, event_type: `report.${name}` } });
  assert.equal(created.status, 201, created.text);
};

test('a clock stepped forward a day sends the newest tick it jumped over, once, and the schedule goes on from there', async () => {
  await schedule('daily', '0 10 * * *');
  await schedule('quarter', '*/15 * * * *');
  assert.equal(lookAt(START + 10 * MINUTE), 2, 'the 10:00 ticks');
  await eventually('the 10:00 ticks', async () => [...(await ticksOf('report.daily')), ...(await ticksOf('report.quarter'))], (ticks) => ticks.length === 2);

  assert.equal(lookAt(START + DAY + 30 * MINUTE), 2, 'one tick each, the newest jumped over');
  assert.deepEqual(await eventually('the daily tick', () => ticksOf('report.daily'), (ticks) => ticks.length === 2), ['2026-11-30T10:00:00.000Z', '2026-12-01T10:00:00.000Z']);
  assert.deepEqual(await eventually('the quarter tick', () => ticksOf('report.quarter'), (ticks) => ticks.length === 2), ['2026-11-30T10:00:00.000Z', '2026-12-01T10:15:00.000Z']);
  await eventually('the next quarter tick to be armed', () => s.runtime.ticker.timers.dueAt(`${ORG}\u0000quarter`), (at) => at === Date.UTC(2026, 11, 1, 10, 30, 0));
  const shown = await call(s.url, 'GET', `/organizations/${ORG}/schedules/daily`, { token: s.key });
  assert.deepEqual([shown.body.schedule.last_sent_tick_at, shown.body.schedule.next_tick_at], ['2026-12-01T10:00:00.000Z', '2026-12-02T10:00:00.000Z']);
});
