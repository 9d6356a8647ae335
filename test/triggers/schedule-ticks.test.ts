// The tick arithmetic of schedules, on croner and its wrapper: crontab-only patterns, canonical
// zones, daylight saving (a tick in a skipped hour fires once, one ending at midnight too, a
// repeated hour fires once, lists and ranges of hours included), and a clock set back behind the last tick done.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Cron } from 'croner';
import { InputError } from '../../runtime/errors.ts';
import { checkSchedule, MAX_CRON_LENGTH, nextTickAt, tickOwed, type ScheduleRecord } from '../../runtime/triggers/schedule-record.ts';

const schedule = (cron: string, timezone: string, lastTickMs: number): ScheduleRecord => ({
  id: 'sch_test', org_id: 'org', name: 'n', cron, timezone, event_type: 't', environment: 'production', payload_json: 'null',
  enabled: true, created_at: '', updated_at: '', last_tick_ms: lastTickMs, last_sent_tick_ms: null,
});

/** Every tick of the schedule in [from, to), walking as the ticker does. */
function ticksBetween(cron: string, timezone: string, from: number, to: number): string[] {
  const ticks: string[] = [];
  let record = schedule(cron, timezone, from);
  for (let at = nextTickAt(record, from); at !== undefined && at < to; at = nextTickAt(record, at)) {
    ticks.push(new Date(at).toISOString());
    record = { ...record, last_tick_ms: at };
  }
  return ticks;
}

test('a value out of its field\'s range is named in crontab terms, not in the parser\'s 0-based counting', () => {
  for (const [cron, named] of [['0 0 0 * *', 'day of month (1-31)'], ['0 0 * 13 *', 'month (1-12 or JAN-DEC)'], ['0 0 32 * *', 'day of month (1-31)'], ['0 24 * * *', 'hour (0-23)'], ['0 0 * * 8', 'day of week (0-7 or SUN-SAT)'], ['1-60/5 * * * *', 'minute (0-59)'], ['0 0 * * 1-8', 'day of week (0-7 or SUN-SAT)'], ['0 0 20-32/2 * *', 'day of month (1-31)']]) {
    assert.throws(() => checkSchedule(cron!, 'UTC'), (error: unknown) => error instanceof InputError && error.message === `The cron pattern cannot be read: a value of the ${named} field is out of its range.`, cron);
  }
});

test('the parser\'s other complaints are said in crontab terms, never with values as it rewrote them or its off-by-one maximum', () => {
  const said: Array<[string, RegExp]> = [
    ['-1 * * * *', /a value is not a number or a name where one is due/],
    ['0-59/61 * * * *', /a step \(\/n\) is larger than its field's range/],
    ['0 0 * * mon/2', /a step \(\/n\) follows a single value: step a range/],
    ['5-1 * * * *', /a range runs backwards/],
    ['*/0 * * * *', /a step of 0 \(\/0\) never moves on/],
    ['0 0 */ * *', /a step \(\/n\) needs a whole number after its slash/],
    ['1--2 * * * *', /a range is malformed: write n-m or n-m\/step/],
    [',1 * * * *', /a list has an empty item/],
  ];
  for (const [cron, message] of said) {
    assert.throws(() => checkSchedule(cron, 'UTC'), (error: unknown) => error instanceof InputError && error.code === 'invalid_cron' && message.test(error.message) && !/CronPattern|'1\/2'|\(60\)/.test(error.message), cron);
  }
});

test('only crontab patterns pass, and zones are stored as written in their canonical case, never as an older alias', () => {
  for (const cron of ['0 0 1 * +1', '0 0 L * *', '0 0 ? * *', '0 0 * * 1#2', '0 0 15W * *', '* * * * * *', '0 9 * *']) {
    assert.throws(() => checkSchedule(cron, 'UTC'), (error: unknown) => error instanceof InputError && error.code === 'invalid_cron', cron);
  }
  assert.deepEqual(checkSchedule('  0 9 * * mon-fri ', 'europe/berlin'), { cron: '0 9 * * mon-fri', timezone: 'Europe/Berlin' });
  // Only spaces and tabs separate fields: another space character would be stored looking like one.
  assert.deepEqual(checkSchedule('0\t9  * * *', 'UTC').cron, '0\t9  * * *');
  for (const [cron, named] of [['0\u00a09 * * *', 'U+00A0 at position 2'], ['0 9 * *\u2028*', 'U+2028 at position 8'], ['0 9\n* * *', 'U+000A at position 4'], [' \t 0\u00a09 * * *', 'U+00A0 at position 5'], ['\u{1F600}\u00a0* * * *', 'U+00A0 at position 2']] as const) {
    assert.throws(() => checkSchedule(cron, 'UTC'), (error: unknown) => error instanceof InputError && error.code === 'invalid_cron' && error.message.endsWith(`${named}.`), cron);
  }
  assert.deepEqual(checkSchedule('@daily', 'utc'), { cron: '@daily', timezone: 'UTC' });
  assert.deepEqual(checkSchedule('*/10 1-5,22 1,15 JAN,jul *', 'Asia/Kolkata').cron, '*/10 1-5,22 1,15 JAN,jul *');
  // Node 20's ICU resolves these to Asia/Calcutta, Europe/Kiev, America/Godthab: the names given stay.
  for (const zone of ['Asia/Kolkata', 'Europe/Kyiv', 'America/Nuuk', 'Asia/Calcutta']) assert.equal(checkSchedule('0 9 * * *', zone).timezone, zone);
  assert.throws(() => checkSchedule('* * * * *', '+01:00'), (error: unknown) => error instanceof InputError && error.code === 'invalid_timezone');
});

test('daylight saving in New York: a skipped 02:00 fires once at 03:00, a repeated 01:30 fires once, lists and ranges too', () => {
  const spring = Date.UTC(2026, 2, 7, 12);
  assert.deepEqual(ticksBetween('0 2,14 * * *', 'America/New_York', spring, spring + 36 * 3_600_000), [
    '2026-03-07T19:00:00.000Z', // 14:00 EST
    '2026-03-08T07:00:00.000Z', // 02:00 does not exist: 03:00 EDT
    '2026-03-08T18:00:00.000Z', // 14:00 EDT
  ]);
  const fall = Date.UTC(2026, 9, 31, 12);
  assert.deepEqual(ticksBetween('30 1,13 * * *', 'America/New_York', fall, fall + 36 * 3_600_000), [
    '2026-10-31T17:30:00.000Z', // 13:30 EDT
    '2026-11-01T05:30:00.000Z', // the first 01:30 (EDT) only
    '2026-11-01T18:30:00.000Z', // 13:30 EST
  ]);
  assert.equal(ticksBetween('0 1-2 * * *', 'America/New_York', fall, fall + 24 * 3_600_000).length, 2, 'one 01:00 and one 02:00');
  // An interval pattern keeps its interval across the change: every hour of real time, once.
  const hourly = ticksBetween('0 * * * *', 'America/New_York', Date.UTC(2026, 10, 1, 0), Date.UTC(2026, 10, 1, 12)).map((at) => Date.parse(at));
  assert.deepEqual(hourly, Array.from({ length: 11 }, (_, i) => Date.UTC(2026, 10, 1, i + 1)));
});

test('daylight saving with * or a step in the minute or hour field follows the wall clock (Vixie cron): no tick in a skipped hour, two rounds in a repeated one', () => {
  const spring = Date.UTC(2026, 2, 28, 22); // Europe/Berlin: 02:00-03:00 is skipped on 2026-03-29
  assert.deepEqual(ticksBetween('*/15 2 * * *', 'Europe/Berlin', spring, spring + 24 * 3_600_000), [], 'no 02:xx exists that day');
  const fall = Date.UTC(2026, 9, 24, 22); // 02:00-03:00 happens twice on 2026-10-25
  assert.equal(ticksBetween('*/15 2 * * *', 'Europe/Berlin', fall, fall + 24 * 3_600_000).length, 8, '02:00-02:45 in CEST, then again in CET');
  // A fixed time's skipped ticks and the tick due when the hour ends make one event.
  assert.deepEqual(ticksBetween('0 1-3 * * *', 'Europe/Berlin', spring, spring + 24 * 3_600_000), ['2026-03-29T00:00:00.000Z', '2026-03-29T01:00:00.000Z']);
});

test('a skipped hour that ends at midnight (America/Nuuk: 23:00 goes to 00:00) still sends a fixed time\'s tick once, at 00:00', () => {
  const spring = Date.UTC(2026, 2, 27, 12); // 2026-03-28 23:00 -02 is 2026-03-29 00:00 -01 (01:00 UTC)
  assert.deepEqual(ticksBetween('30 23 * * *', 'America/Nuuk', spring, spring + 62 * 3_600_000), [
    '2026-03-28T01:30:00.000Z', // 23:30 -02 on the 27th
    '2026-03-29T01:00:00.000Z', // 23:30 on the 28th does not exist: 00:00 -01 on the 29th
    '2026-03-30T00:30:00.000Z', // 23:30 -01 on the 29th
  ]);
  assert.deepEqual(ticksBetween('15,45 23 * * *', 'America/Scoresbysund', spring, spring + 48 * 3_600_000), ['2026-03-28T01:15:00.000Z', '2026-03-28T01:45:00.000Z', '2026-03-29T01:00:00.000Z'], 'two skipped times make one tick');
  // Owed at the moment the hour ends, as the ticker asks when its timer fires, and done once sent.
  const gapEnd = Date.UTC(2026, 2, 29, 1);
  assert.equal(tickOwed(schedule('30 23 * * *', 'America/Nuuk', gapEnd - 3_600_000), gapEnd), gapEnd);
  assert.equal(tickOwed(schedule('30 23 * * *', 'America/Nuuk', gapEnd), gapEnd + 60_000), undefined);
  // A pattern that names no skipped time, or follows the wall clock, sends nothing extra.
  assert.deepEqual(ticksBetween('0 22 * * *', 'America/Nuuk', spring, spring + 62 * 3_600_000), ['2026-03-28T00:00:00.000Z', '2026-03-29T00:00:00.000Z', '2026-03-29T23:00:00.000Z']);
  assert.deepEqual(ticksBetween('*/30 23 * * *', 'America/Nuuk', Date.UTC(2026, 2, 28, 12), Date.UTC(2026, 2, 29, 12)), [], 'no 23:xx exists that night');
  assert.deepEqual(ticksBetween('30 23 * * *', 'America/Nuuk', Date.UTC(2027, 2, 26, 12), Date.UTC(2027, 2, 28, 12)), ['2027-03-27T01:30:00.000Z', '2027-03-28T01:00:00.000Z'], 'every spring, not one year');
});

test('a clock set back far behind the last tick done counts from now, not from the future; a small step back is waited out', () => {
  const now = Date.UTC(2026, 10, 30, 10, 0, 1);
  const ahead = schedule('0 * * * *', 'UTC', Date.UTC(2027, 10, 30, 10));
  assert.equal(tickOwed(ahead, now), Date.UTC(2026, 10, 30, 10), 'the newest tick up to now is owed (its event id keeps it from being stored twice)');
  const caughtUp = { ...ahead, last_tick_ms: Date.UTC(2026, 10, 30, 10) };
  assert.equal(nextTickAt(caughtUp, now), Date.UTC(2026, 10, 30, 11), 'then the next hour, not next year');
  assert.equal(tickOwed(caughtUp, Date.UTC(2026, 10, 30, 11)), Date.UTC(2026, 10, 30, 11));
  // A step of a few seconds back right after the 10:00 tick sends nothing: not 09:00 again, not 10:00 twice.
  const justSent = schedule('0 * * * *', 'UTC', Date.UTC(2026, 10, 30, 10));
  const stepBack = Date.UTC(2026, 10, 30, 9, 59, 58);
  assert.equal(tickOwed(justSent, stepBack), undefined);
  assert.equal(nextTickAt(justSent, stepBack), Date.UTC(2026, 10, 30, 11), 'next_tick_at names the tick that will be sent, not 10:00 again');
  const fiveMinutes = schedule('*/5 * * * *', 'UTC', Date.UTC(2026, 10, 30, 10));
  assert.equal(nextTickAt(fiveMinutes, Date.UTC(2026, 10, 30, 9, 20)), Date.UTC(2026, 10, 30, 10, 5), 'set back 40 minutes: the ticks up to 10:00 were sent');
  assert.equal(tickOwed(justSent, Date.UTC(2026, 10, 30, 10)), undefined, 'its time comes again: done already');
  assert.equal(nextTickAt(justSent, Date.UTC(2026, 10, 30, 10)), Date.UTC(2026, 10, 30, 11));
  const missed = schedule('0 * * * *', 'UTC', Date.UTC(2026, 10, 30, 7));
  assert.equal(tickOwed(missed, now), Date.UTC(2026, 10, 30, 10), 'only the newest missed tick is owed');
  assert.equal(nextTickAt(missed, now), now);
});

test('a start mark: a tick at the very start is done; once a tick at or after the start was sent, the mark no longer counts', () => {
  const at = (hh: number, mm = 0) => Date.UTC(2026, 10, 30, hh, mm);
  // Started exactly on 12:00, its start passed over by a clock set back to 10:00:30 (last_tick_ms is then that reading).
  const onTick: ScheduleRecord = { ...schedule('0 * * * *', 'UTC', at(10) + 30_000), started_ms: at(12) };
  assert.equal(tickOwed(onTick, at(12)), undefined, 'the 12:00 tick is the start itself');
  assert.equal(nextTickAt(onTick, at(11, 30)), at(13), 'next_tick_at names the tick that will be sent');
  assert.equal(nextTickAt(onTick, at(12)), at(13));
  // A record that kept its mark after sending ticks past it (written before the mark was dropped at a sent tick).
  const sentPast: ScheduleRecord = { ...schedule('0 * * * *', 'UTC', at(14)), last_sent_tick_ms: at(14), started_ms: at(12, 10) };
  assert.equal(tickOwed(sentPast, at(11, 30)), at(11), 'a set back of more than an hour is trusted: the owed tick is sent');
});

test('a start set while the clock read before the last tick sent (a re-time after a small set back) keeps its mark through a pass-over', () => {
  const at = (hh: number, mm = 0) => Date.UTC(2026, 10, 30, hh, mm);
  // Re-timed to :30 at 11:57 by a clock 5 minutes back from the sent 12:00 tick, then passed over at 09:58.
  const retimed: ScheduleRecord = { ...schedule('30 * * * *', 'UTC', at(9, 58)), last_sent_tick_ms: at(12), started_ms: at(11, 57) };
  assert.equal(tickOwed(retimed, at(12, 5)), undefined, 'the 11:30 tick is from before the start');
  assert.equal(nextTickAt(retimed, at(12, 5)), at(12, 30));
});

test('days match as in crontab: both day fields when either starts with *, either one when both are restricted', () => {
  const from = Date.parse('2025-12-31T12:00:00Z');
  const to = Date.parse('2026-02-01T00:00:00Z');
  const days = (cron: string): string[] => ticksBetween(cron, 'UTC', from, to).map((tick) => tick.slice(0, 10));
  assert.deepEqual(days('0 0 */2 * 1'), ['2026-01-05', '2026-01-19'], 'odd-numbered days that are Mondays');
  assert.deepEqual(days('0 0 1-10 * */3'), ['2026-01-03', '2026-01-04', '2026-01-07', '2026-01-10'], 'days 1-10 that are Sundays, Wednesdays or Saturdays');
  assert.deepEqual(days('0 0 1,15 * 1'), ['2026-01-01', '2026-01-05', '2026-01-12', '2026-01-15', '2026-01-19', '2026-01-26'], 'the 1st, the 15th and every Monday');
  assert.deepEqual(days('0 0 1-31/2 * 1'), days('0 0 1-31/2 * *').concat(['2026-01-12', '2026-01-26']).sort(), 'a step without * is restricted: odd days or Mondays');
});

test('a pattern whose days never exist never fires: told from its day and month fields, as croner\'s own search would tell it', () => {
  const dayFields = ['30', '31', '29', '1', '30,31', '29-31', '*/31', '31/5', '28-31/3', '*'];
  const monthFields = ['2', 'feb', '4,6,9,11', 'apr-jun/2', '2,4,6,9,11', '*/2', '1', '*'];
  let neverFires = 0;
  for (const days of dayFields) {
    for (const months of monthFields) {
      for (const weekdays of ['*', '*/1', '1', 'mon-fri']) {
        const cron = `59 23 ${days} ${months} ${weekdays}`;
        const bothRestricted = !days.startsWith('*') && !weekdays.startsWith('*');
        let fires: boolean;
        try {
          fires = new Cron(cron, { timezone: 'UTC', paused: true, mode: '5-part', domAndDow: !bothRestricted }).nextRun() !== null;
        } catch {
          assert.throws(() => checkSchedule(cron, 'UTC'), (error: unknown) => error instanceof InputError && /cannot be read/.test(error.message), cron);
          continue;
        }
        if (fires) assert.equal(checkSchedule(cron, 'UTC').cron, cron);
        else assert.throws(() => checkSchedule(cron, 'UTC'), (error: unknown) => error instanceof InputError && error.code === 'invalid_cron' && /never fires/.test(error.message), cron);
        if (!fires) neverFires++;
      }
    }
  }
  assert.ok(neverFires >= 15, `the matrix holds patterns that never fire (${neverFires})`);
  // A pattern croner cannot read is told so first, though its days never exist either.
  for (const cron of ['0 0 30 2 */8', '0 0 30-31/32 2 *', '0 0 31 2-2/13 *']) {
    assert.throws(() => checkSchedule(cron, 'UTC'), (error: unknown) => error instanceof InputError && /cannot be read/.test(error.message), cron);
  }
});

test('a pattern longer than the cap is refused by the check itself (sluice cron too), not only by the API\'s body schema', () => {
  const long = `${Array.from({ length: 60 }, (_, i) => i).join(',')} * * * *`;
  assert.ok(long.length > MAX_CRON_LENGTH);
  assert.throws(() => checkSchedule(long, 'UTC'), (error: unknown) => error instanceof InputError && error.code === 'invalid_cron' && error.message.includes(`at most ${MAX_CRON_LENGTH} characters`));
  // Counted as the schema counts it: white space around the pattern too.
  const fits = `${Array.from({ length: 40 }, (_, i) => i).join(',')} * * * *`;
  assert.ok(fits.length <= MAX_CRON_LENGTH && fits.length + 10 > MAX_CRON_LENGTH);
  assert.equal(checkSchedule(fits, 'UTC').cron, fits);
  assert.throws(() => checkSchedule(`     ${fits}     `, 'UTC'), (error: unknown) => error instanceof InputError && error.code === 'invalid_cron');
});
