// When a pattern ticks: croner's times merged with the fixed-time ticks that a spring-forward gap
// ending at midnight skips, in both directions, each tick once, fixed-time as croner counts it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextTick, nextTicks, previousTicks } from '../../runtime/triggers/schedule-times.ts';

const iso = (ticks: readonly number[]) => ticks.map((at) => new Date(at).toISOString());
const NUUK_GAP_END = Date.UTC(2026, 2, 29, 1); // 2026-03-28 23:00 -02 is 2026-03-29 00:00 -01

test('forward and back alike: the gap tick at 00:00 between croner\'s ticks, newest first going back', () => {
  const schedule = { cron: '30 23 * * *', timezone: 'America/Nuuk' };
  assert.deepEqual(iso(nextTicks(schedule, 3, Date.UTC(2026, 2, 27, 12))), ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']);
  assert.deepEqual(iso(previousTicks(schedule, 3, Date.UTC(2026, 2, 30, 12))), ['2026-03-30T00:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-28T01:30:00.000Z']);
  assert.equal(nextTick(schedule, NUUK_GAP_END - 1), NUUK_GAP_END);
  assert.equal(nextTick(schedule, NUUK_GAP_END), Date.UTC(2026, 2, 30, 0, 30), 'after it, the next day\'s');
  assert.deepEqual(previousTicks(schedule, 1, NUUK_GAP_END), [Date.UTC(2026, 2, 28, 1, 30)], 'before it (exclusive), the day before\'s');
});

test('a gap croner fires in itself (within one local date) gives its tick once', () => {
  const schedule = { cron: '30 2 * * *', timezone: 'Europe/Berlin' };
  assert.deepEqual(iso(nextTicks(schedule, 3, Date.UTC(2026, 2, 27, 12))), ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']);
  assert.deepEqual(iso(previousTicks(schedule, 3, Date.UTC(2026, 2, 30, 12))), ['2026-03-30T00:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-28T01:30:00.000Z']);
});

test('fixed time as croner counts it: ranges and lists are, steps and * are not', () => {
  const ticksOn = (cron: string) => iso(nextTicks({ cron, timezone: 'America/Nuuk' }, 50, Date.UTC(2026, 2, 28, 12)).filter((at) => at < Date.UTC(2026, 2, 29, 12)));
  assert.deepEqual(ticksOn('0-59 23 * * *'), ['2026-03-29T01:00:00.000Z'], 'sixty skipped minutes, one tick');
  assert.deepEqual(ticksOn('0,30 22,23 * * *'), ['2026-03-29T00:00:00.000Z', '2026-03-29T00:30:00.000Z', '2026-03-29T01:00:00.000Z']);
  assert.deepEqual(ticksOn('*/30 23 * * *'), []);
  assert.deepEqual(ticksOn('0 22-23/1 * * *'), ['2026-03-29T00:00:00.000Z'], 'a step in the hour field follows the wall clock');
});
