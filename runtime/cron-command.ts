// `sluice cron`: prints the next ticks of a schedule's pattern in its time zone, checked by the same
// rules the schedules API applies, so a pattern can be tried before a schedule is made with it.

import { parseCommandArgs } from './cli-parse-args.ts';
import { wholeNumberOfDigits } from './decimal-digits.ts';
import { InputError } from './errors.ts';
import { checkSchedule, ticksAfter } from './triggers/schedule-record.ts';

const USAGE = 'usage: sluice cron "<pattern>" [--timezone <IANA zone>] [--count <1-50>]';

/** The next `--count` ticks after `nowMs`, one per line: UTC, then the wall time in the zone. */
export function cronCommand(args: readonly string[], nowMs: number): string {
  const { values, positionals } = parseCommandArgs({
    args: [...args],
    strict: true,
    allowPositionals: true,
    options: { timezone: { type: 'string' }, count: { type: 'string' } },
  });
  if (positionals.length !== 1) throw new InputError(400, 'usage', USAGE);
  const givenCount = values.count ?? '5';
  const count = wholeNumberOfDigits(givenCount, 2);
  if (!Number.isInteger(count) || count < 1 || count > 50) throw new InputError(400, 'invalid_count', `--count must be a whole number from 1 to 50. ${USAGE}`);
  const { cron, timezone } = checkSchedule(positionals[0] ?? '', values.timezone ?? 'UTC');
  const wallTime = new Intl.DateTimeFormat('en-GB', {
    timeZone: timezone, weekday: 'short', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZoneName: 'short',
  });
  const lines = [`${cron} in ${timezone}, next ${count}:`];
  for (const at of ticksAfter({ cron, timezone }, nowMs, count)) lines.push(`  ${new Date(at).toISOString()}  ${wallTime.format(at)}`);
  return lines.join('\n');
}
