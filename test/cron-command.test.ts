// `sluice cron`: prints the next ticks of a pattern as the schedules API would send them (across a
// daylight-saving change too), and refuses what the API refuses, with its message.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cronCommand } from '../runtime/cron-command.ts';

const NOW = Date.UTC(2026, 2, 6, 12, 0, 0);

test('the next ticks in the zone, UTC first, across the spring-forward night in New York', () => {
  const lines = cronCommand(['0 2,14 * * *', '--timezone', 'america/new_york', '--count', '4'], NOW).split('\n');
  assert.equal(lines[0], '0 2,14 * * * in America/New_York, next 4:');
  assert.deepEqual(lines.slice(1).map((line) => line.trim().split(' ')[0]), [
    '2026-03-06T19:00:00.000Z',
    '2026-03-07T07:00:00.000Z',
    '2026-03-07T19:00:00.000Z',
    '2026-03-08T07:00:00.000Z', // 02:00 does not exist that night: 03:00 EDT
  ]);
  assert.match(lines[4]!, /03:00/);
  assert.equal(cronCommand(['@daily'], NOW).split('\n').length, 6, 'five by default');
});

test('the preview shows a tick that a skipped hour ending at midnight moves to 00:00 (America/Nuuk)', () => {
  const lines = cronCommand(['30 23 * * *', '--timezone', 'America/Nuuk', '--count', '3'], Date.UTC(2026, 2, 27, 12)).split('\n');
  assert.deepEqual(lines.slice(1).map((line) => line.trim().split(' ')[0]), ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']);
  assert.match(lines[2]!, /00:00/);
});

test('what the API refuses is refused with its message; usage when the pattern is missing', () => {
  assert.throws(() => cronCommand(['0 0 L * *'], NOW), /A cron pattern has five fields/);
  assert.throws(() => cronCommand(['0 0 * * *', '--timezone', 'Mars/Olympus'], NOW), /not an IANA time zone/);
  for (const count of ['0', '0x5', '5.0', '', ' 5', '51']) assert.throws(() => cronCommand(['0 0 * * *', '--count', count], NOW), /--count must be a whole number from 1 to 50/, count);
  assert.throws(() => cronCommand([], NOW), /usage: sluice cron/);
});
