// The spring-forward gaps of a time zone, read from Intl: where they fall to the second, the
// wall-clock times they skip, and the edges of the range asked about.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { offsetMs, zoneGapsBetween } from '../../runtime/triggers/zone-gaps.ts';

const iso = (ms: number) => new Date(ms).toISOString();
const shown = (timezone: string, afterMs: number, untilMs: number) =>
  zoneGapsBetween(timezone, afterMs, untilMs).map((gap) => [iso(gap.atMs), iso(gap.skippedFromWallMs), iso(gap.skippedUntilWallMs)]);

test('Berlin skips 02:00-03:00 on the last Sunday of March; the autumn change repeats an hour and is no gap', () => {
  assert.deepEqual(shown('Europe/Berlin', Date.UTC(2026, 0, 1), Date.UTC(2027, 0, 1)), [['2026-03-29T01:00:00.000Z', '2026-03-29T02:00:00.000Z', '2026-03-29T03:00:00.000Z']]);
  assert.equal(offsetMs('Europe/Berlin', Date.UTC(2026, 2, 29, 1) - 1_000), 3_600_000);
  assert.equal(offsetMs('Europe/Berlin', Date.UTC(2026, 2, 29, 1)), 7_200_000);
});

test('a gap that ends at midnight, a half-hour gap, and zones without any', () => {
  assert.deepEqual(shown('America/Nuuk', Date.UTC(2026, 0, 1), Date.UTC(2027, 0, 1)), [['2026-03-29T01:00:00.000Z', '2026-03-28T23:00:00.000Z', '2026-03-29T00:00:00.000Z']]);
  // Lord Howe Island moves its clocks by 30 minutes: 02:00 goes to 02:30 on the first Sunday of October.
  assert.deepEqual(shown('Australia/Lord_Howe', Date.UTC(2026, 0, 1), Date.UTC(2027, 0, 1)), [['2026-10-03T15:30:00.000Z', '2026-10-04T02:00:00.000Z', '2026-10-04T02:30:00.000Z']]);
  for (const zone of ['UTC', 'Asia/Kolkata', 'Asia/Tokyo']) assert.deepEqual(shown(zone, Date.UTC(2020, 0, 1), Date.UTC(2030, 0, 1)), [], zone);
});

test('the range is open at its start and closed at its end, and may span years', () => {
  const gap = Date.UTC(2026, 2, 29, 1);
  assert.equal(zoneGapsBetween('Europe/Berlin', gap - 60_000, gap).length, 1, 'a range ending at the gap holds it');
  assert.equal(zoneGapsBetween('Europe/Berlin', gap, gap + 60_000).length, 0, 'a range starting at the gap does not');
  assert.deepEqual(zoneGapsBetween('Europe/Berlin', Date.UTC(2025, 5, 1), Date.UTC(2028, 5, 1)).map((found) => iso(found.atMs)), ['2026-03-29T01:00:00.000Z', '2027-03-28T01:00:00.000Z', '2028-03-26T01:00:00.000Z']);
});

test('Boa Vista\'s week of summer time in October 2000, the only two changes a week apart in the data, is found', () => {
  assert.deepEqual(shown('America/Boa_Vista', Date.UTC(2000, 0, 1), Date.UTC(2001, 0, 1)), [['2000-10-08T04:00:00.000Z', '2000-10-08T00:00:00.000Z', '2000-10-08T01:00:00.000Z']]);
});
