// A schedule: a cron pattern in a time zone that sends one event of a given type at each tick.
// Patterns have five fields (minute resolution) or a nickname such as `@hourly`; croner parses them
// and walks time zones and daylight saving (schedule-times.ts). The ticks it sends are events like
// any other.

import { createHash } from 'node:crypto';
import type { Cron } from 'croner';
import { badRequest } from '../errors.ts';
import { RawJson } from '../validation/raw-json.ts';
import type { Environment } from '../sources/source-record.ts';
import { cronOf, eitherDayFieldStarred, nextTick, nextTicks, previousTicks } from './schedule-times.ts';

export const SCHEDULE_NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,63}$';
/** The source recorded on events a schedule sends. */
export const SCHEDULE_SOURCE = '@schedule';
/** A tick event's payload is the schedule's `payload` inside a small envelope; this bounds the text. */
export const MAX_SCHEDULE_PAYLOAD_BYTES = 64 * 1024;
/** Cron patterns are short; the cap keeps a hostile one from costing the parser anything. */
export const MAX_CRON_LENGTH = 120;

export interface ScheduleRecord {
  /** Random, given at creation: a schedule deleted and made again under its name sends new event ids. */
  readonly id: string;
  readonly org_id: string;
  readonly name: string;
  readonly cron: string;
  /** IANA time zone the pattern is read in. */
  readonly timezone: string;
  readonly event_type: string;
  readonly environment: Environment;
  /** The JSON text sent as `payload.data` with every tick. */
  readonly payload_json: string;
  readonly enabled: boolean;
  readonly created_at: string;
  readonly updated_at: string;
  /**
   * The newest tick that is done: its event is stored (in the same write as this field), or it was
   * passed over. A tick at or before it never sends again; creating, re-timing and enabling set it
   * (and `started_ms`) to now.
   */
  readonly last_tick_ms: number;
  /** The tick of the newest event the schedule sent, if it sent any. */
  readonly last_sent_tick_ms: number | null;
  /**
   * The clock's reading when the schedule started counting ticks (created, re-timed, enabled), until
   * it sends a tick (then dropped). While `last_tick_ms` still equals it, no tick has been done
   * since. Absent in records of older releases.
   */
  readonly started_ms?: number;
}

const NICKNAME = /^@(yearly|annually|monthly|weekly|daily|hourly)$/;
/** Month and weekday names a field may use; anything else but digits and `* , / -` is refused (croner's L, W, #, ? and + are not crontab). */
const NAMES = /\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|sun|mon|tue|wed|thu|fri|sat)\b/gi;
const FIELD = /^[0-9*,/-]+$/;
/** White space other than a space or a tab. */
const OTHER_SPACE = /[^\S \t]/u;
const PATTERN_HELP = 'A cron pattern has five fields (minute hour day-of-month month day-of-week) of digits, `* , / -` and month or weekday names, or is one of @yearly, @monthly, @weekly, @daily, @hourly.';

/**
 * The pattern and zone as stored (trimmed; the zone as written, in its canonical case), or 400
 * naming the field: five crontab fields or a nickname, a pattern that fires at all, and a zone
 * croner can use.
 */
export function checkSchedule(cron: string, timezone: string): { readonly cron: string; readonly timezone: string } {
  let zone: string;
  try {
    // ICU (Node 20) resolves current names to older aliases (Asia/Kolkata to Asia/Calcutta): only
    // its spelling of the very name given is taken, which fixes the case ("europe/berlin").
    const resolved = new Intl.DateTimeFormat('en', { timeZone: timezone }).resolvedOptions().timeZone;
    zone = resolved.toLowerCase() === timezone.toLowerCase() ? resolved : timezone;
    cronOf({ cron: '* * * * *', timezone: zone }).nextRun();
  } catch {
    throw badRequest('invalid_timezone', `"${timezone}" is not an IANA time zone (for example "UTC" or "Europe/Berlin").`, 'timezone');
  }
  // Counted as given, white space around it too, as the API's body schema counts it (in characters):
  // `sluice cron` took a pattern the API then refused.
  if ([...cron].length > MAX_CRON_LENGTH) throw badRequest('invalid_cron', `A cron pattern has at most ${MAX_CRON_LENGTH} characters, white space around it included.`, 'cron');
  const trimmed = cron.trim();
  // Fields are split on spaces and tabs as crontab does; another space character (U+00A0 pasted
  // from a document, a line break) would be stored and shown as if it were one.
  const otherSpace = OTHER_SPACE.exec(trimmed);
  if (otherSpace !== null) {
    const code = `U+${otherSpace[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
    // Counted in characters of the pattern as sent, leading spaces included.
    const position = [...cron.slice(0, cron.indexOf(trimmed) + otherSpace.index)].length + 1;
    throw badRequest('invalid_cron', `Separate a cron pattern's fields with spaces or tabs: it holds ${code} at position ${position}.`, 'cron');
  }
  const fields = trimmed.split(/[ \t]+/);
  if (!NICKNAME.test(trimmed) && (fields.length !== 5 || !fields.every((field) => FIELD.test(field.replace(NAMES, '0'))))) {
    throw badRequest('invalid_cron', PATTERN_HELP, 'cron');
  }
  if (fields.length === 5) assertRangesWithin(fields);
  const unreadable = (error: unknown) => badRequest('invalid_cron', `The cron pattern cannot be read: ${cronerProblem(error)}`.slice(0, 300), 'cron');
  let parsed: Cron;
  try {
    parsed = cronOf({ cron: trimmed, timezone: zone });
  } catch (error) {
    throw unreadable(error);
  }
  // Once read (its own faults come first), a pattern whose days never exist is told from its
  // fields, not by croner's search, which walks about a thousand years a day at a time (~300 ms on the event loop).
  if (fields.length === 5 && eitherDayFieldStarred(trimmed) && !namesAnExistingDay(fields[2]!, fields[3]!)) throw badRequest('invalid_cron', NEVER_FIRES, 'cron');
  let next: Date | null;
  try {
    next = parsed.nextRun();
  } catch (error) {
    throw unreadable(error);
  }
  if (next === null) throw badRequest('invalid_cron', NEVER_FIRES, 'cron');
  return { cron: trimmed, timezone: zone };
}

const NEVER_FIRES = 'The cron pattern never fires (for example February 30th).';
const MONTH_NAMES = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
/** The most days each month has (February 29 in leap years). */
const MONTH_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * The values a field (within its bounds, ranges checked) lists, or undefined for one this reading
 * does not follow (croner then decides). Items are `n`, and `*` or `n-m` with an optional `/step`.
 */
function fieldValues(field: string, min: number, max: number, names: readonly string[] = []): Set<number> | undefined {
  const values = new Set<number>();
  const number = (text: string): number => (names.includes(text.toLowerCase()) ? names.indexOf(text.toLowerCase()) + min : /^\d+$/.test(text) ? Number(text) : Number.NaN);
  for (const item of field.split(',')) {
    const [range = '', stepText] = item.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    // `n/step` is not crontab (croner refuses it, naming the problem).
    if (stepText !== undefined && range !== '*' && !range.includes('-')) return undefined;
    const [from, to] = range === '*' ? [min, max] : range.includes('-') ? range.split('-').map(number) : [number(range), number(range)];
    if (!Number.isInteger(step) || step < 1 || !Number.isInteger(from) || !Number.isInteger(to) || from! > to!) return undefined;
    for (let value = from!; value <= to!; value += step) values.add(value);
  }
  return values;
}

/**
 * Whether some listed day of month exists in some listed month. When a day must match both day
 * fields, a pattern without one never fires; with one, it fires: a date that exists falls on every
 * weekday within a few decades (February 29th too).
 */
function namesAnExistingDay(dayField: string, monthField: string): boolean {
  const days = fieldValues(dayField, 1, 31);
  const months = fieldValues(monthField, 1, 12, MONTH_NAMES);
  if (days === undefined || months === undefined) return true;
  const fewest = Math.min(...days);
  return [...months].some((month) => fewest <= (MONTH_DAYS[month - 1] ?? 0));
}

/** Croner's fields, with the range a crontab writer knows (croner counts days and months from 0 in its messages). */
const FIELD_RANGES: Readonly<Record<string, string>> = {
  second: 'second (0-59)',
  minute: 'minute (0-59)',
  hour: 'hour (0-23)',
  day: 'day of month (1-31)',
  month: 'month (1-12 or JAN-DEC)',
  dayOfWeek: 'day of week (0-7 or SUN-SAT)',
};

/** Each field's key in FIELD_RANGES and its bounds, in crontab order. */
const FIELD_BOUNDS: ReadonlyArray<readonly [field: string, min: number, max: number]> = [['minute', 0, 59], ['hour', 0, 23], ['day', 1, 31], ['month', 1, 12], ['dayOfWeek', 0, 7]];

/**
 * Refuses a range whose end lies outside its field (`1-60/5`): croner checks only the values a step
 * reaches, and crontab refuses the range. Names (JAN, MON) are within their fields by definition.
 */
function assertRangesWithin(fields: readonly string[]): void {
  for (const [i, [field, min, max]] of FIELD_BOUNDS.entries()) {
    for (const item of fields[i]!.split(',')) {
      for (const bound of item.split('/')[0]!.split('-')) {
        if (!/^\d+$/.test(bound)) continue;
        if (Number(bound) < min || Number(bound) > max) throw badRequest('invalid_cron', `The cron pattern cannot be read: a value of the ${FIELD_RANGES[field]} field is out of its range.`, 'cron');
      }
    }
  }
}

/**
 * Croner's complaints that would mislead as written, in crontab terms: it names values as it
 * rewrote them (`mon/2` as '1/2'), "Syntax error, illegal lower range (NaN)" for a "-1", and a
 * field's maximum as one past it.
 */
const CRONER_COMPLAINTS: ReadonlyArray<readonly [RegExp, string]> = [
  [/illegal (lower|upper) range/, 'a value is not a number or a name where one is due (such as "-1").'],
  [/steps cannot be greater than maximum value/, 'a step (/n) is larger than its field\'s range.'],
  [/stepping with numeric prefix/, 'a step (/n) follows a single value: step a range (1-5/2) or * (*/2).'],
  [/From value is larger than to value/, 'a range runs backwards (its start is past its end).'],
  [/illegal stepping: 0/, 'a step of 0 (/0) never moves on.'],
  [/illegal stepping/, 'a step (/n) needs a whole number after its slash.'],
  [/illegal range/, 'a range is malformed: write n-m or n-m/step.'],
  [/is empty/, 'a list has an empty item (a "," at its start or end, or two in a row).'],
];

/** Croner's complaint in crontab terms: "Invalid value for day: -1" (for a 0 written) names the field and its range instead. */
function cronerProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const field = /Invalid value for (\w+)/.exec(message)?.[1];
  const range = field === undefined ? undefined : FIELD_RANGES[field];
  if (range !== undefined) return `a value of the ${range} field is out of its range.`;
  return CRONER_COMPLAINTS.find(([said]) => said.test(message))?.[1] ?? message;
}

/**
 * How far behind the last tick sent the clock may be set back and still be waited out: up to this,
 * the ticks of the time it went back were sent already (a step of a few seconds right after a tick
 * must not send the tick before it again), so the schedule goes on when the clock passes its last
 * tick again, at most this late.
 */
export const WAITED_OUT_SET_BACK_MS = 60 * 60_000;

/**
 * Whether the tick at `tickMs` is done: at or before `last_tick_ms`. A `last_tick_ms` more than
 * WAITED_OUT_SET_BACK_MS past `nowMs` means the clock was far ahead when it was written and has been
 * set back; trusting it would keep the schedule quiet until the clock caught up (a year, for a host
 * clock that ran a year ahead), so then no tick counts as done: the newest one owed is sent and
 * `last_tick_ms` comes back to the clock (a tick sent before keeps its event id, so it is not stored
 * twice while that event is retained).
 */
export const isTickDone = (schedule: ScheduleRecord, tickMs: number, nowMs: number): boolean =>
  (schedule.last_tick_ms <= nowMs + WAITED_OUT_SET_BACK_MS && tickMs <= schedule.last_tick_ms) || isBeforeStart(schedule, tickMs, nowMs);

/**
 * A tick before the schedule started (`started_ms`, kept only until it sends a tick) is not owed
 * once the clock is back near or past that start: a start passed over as far ahead of a slow clock
 * (startedAheadOfClock) keeps its mark, so a clock corrected again does not send a tick from before
 * the schedule existed. Once it has sent a tick, set backs follow the rules above alone.
 */
const isBeforeStart = (schedule: ScheduleRecord, tickMs: number, nowMs: number): boolean =>
  schedule.started_ms !== undefined &&
  // A record written before the mark was dropped at a sent tick may still hold it: a tick sent
  // after the start ends it (a start set later, with an older tick sent, has last_tick_ms at it).
  (schedule.last_sent_tick_ms === null || schedule.last_sent_tick_ms < schedule.started_ms || schedule.last_tick_ms <= schedule.started_ms) &&
  // A tick at the very start is done, as one at `last_tick_ms` is.
  tickMs <= schedule.started_ms &&
  schedule.started_ms <= nowMs + WAITED_OUT_SET_BACK_MS;

/**
 * Whether the schedule started (created, re-timed, enabled) while the clock was more than
 * WAITED_OUT_SET_BACK_MS ahead of `nowMs`, and has done no tick since. It started at some real time
 * before now that cannot be told, so a tick owed by the clock now may fall before it: that tick is
 * passed over (`last_tick_ms` becomes now; `started_ms` stays, should the clock be right again).
 */
export const startedAheadOfClock = (schedule: ScheduleRecord, nowMs: number): boolean =>
  schedule.last_tick_ms > nowMs + WAITED_OUT_SET_BACK_MS && schedule.last_tick_ms === schedule.started_ms;

/** The newest tick at or before `nowMs` that is not done: the one tick owed now, if any. */
export function tickOwed(schedule: ScheduleRecord, nowMs: number): number | undefined {
  const [at] = previousTicks(schedule, 1, nowMs + 1);
  return at !== undefined && !isTickDone(schedule, at, nowMs) ? at : undefined;
}

/**
 * Where catching up after failed writes starts: `oldestOwedMs` (the oldest tick owed), or later
 * when more than `limit` ticks are owed by `nowMs`: then the oldest of the newest `limit` (older
 * ones are passed over). Walks at most `limit` ticks forward; only past that asks croner for the
 * newest `limit` (slower: ~10 ms for 100).
 */
export function catchUpStart(schedule: ScheduleRecord, oldestOwedMs: number, nowMs: number, limit: number): number {
  let at = oldestOwedMs;
  for (let owed = 1; owed <= limit; owed++) {
    const next = nextTick(schedule, at);
    if (next === undefined || next > nowMs) return oldestOwedMs;
    at = next;
  }
  const latest = previousTicks(schedule, limit, nowMs + 1);
  return latest.length === limit ? Math.max(oldestOwedMs, latest[limit - 1]!) : oldestOwedMs;
}

/**
 * Catching up after failed writes: `fromMs` (a tick that could not be written) if it is not done,
 * else the schedule's first tick after its last one done, if that is due by `nowMs` and not done.
 * Undefined when caught up.
 */
export function oldestTickOwedSince(schedule: ScheduleRecord, fromMs: number, nowMs: number): number | undefined {
  if (fromMs <= nowMs && !isTickDone(schedule, fromMs, nowMs)) return fromMs;
  const next = nextTick(schedule, Math.max(fromMs, schedule.last_tick_ms));
  return next !== undefined && next <= nowMs && !isTickDone(schedule, next, nowMs) ? next : undefined;
}

/**
 * When the schedule should next send: now if a tick is owed, else its first tick after now that it
 * will send: after the last tick done while a small set back is waited out (isTickDone), and after
 * its start (isBeforeStart); undefined: never again.
 */
export function nextTickAt(schedule: ScheduleRecord, nowMs: number): number | undefined {
  if (tickOwed(schedule, nowMs) !== undefined) return nowMs;
  const waitingOut = schedule.last_tick_ms <= nowMs + WAITED_OUT_SET_BACK_MS;
  const next = nextTick(schedule, waitingOut ? Math.max(nowMs, schedule.last_tick_ms) : nowMs);
  if (next === undefined || schedule.started_ms === undefined || !isBeforeStart(schedule, next, next)) return next;
  return nextTick(schedule, schedule.started_ms);
}

/** The next `count` ticks of a pattern after `afterMs`, as the ticker walks them (the CLI's preview). */
export function ticksAfter(schedule: Pick<ScheduleRecord, 'cron' | 'timezone'>, afterMs: number, count: number): number[] {
  return nextTicks(schedule, count, afterMs);
}

/** Whether two records of a schedule tick alike and send the same event (the same schedule, unchanged since). */
export const sendsAlike = (a: ScheduleRecord, b: ScheduleRecord): boolean =>
  a.id === b.id && a.cron === b.cron && a.timezone === b.timezone && a.event_type === b.event_type && a.payload_json === b.payload_json && a.environment === b.environment;

/** The deterministic id of the event a schedule sends for the tick at `tickMs`. */
export const tickEventId = (schedule: ScheduleRecord, tickMs: number): string =>
  `evt_sch_${createHash('sha256').update(`${schedule.id}\u0000${tickMs}`).digest('hex').slice(0, 32)}`;

/**
 * The API view (answer it with rawJson): the record without its internal fields, with the next tick
 * when enabled. `armedAt` is when the ticker's timer for it fires, if armed: that time (now, once
 * due), which spares croner's walk (a few ms for a rare pattern such as February 29th on a Sunday,
 * for each schedule of a list); worked out from the record when not armed. After the wall clock is
 * set back, the time armed before shows until the timers next look (at most a minute, run-timers.ts).
 */
export function describeSchedule(schedule: ScheduleRecord, nowMs: number, armedAt?: number): Record<string, unknown> {
  let next: number | undefined;
  try {
    next = !schedule.enabled ? undefined : armedAt === undefined ? nextTickAt(schedule, nowMs) : Math.max(armedAt, nowMs);
  } catch {
    // A stored pattern or zone this croner cannot read any more (the ticker logs it): no next tick.
  }
  return {
    name: schedule.name,
    cron: schedule.cron,
    timezone: schedule.timezone,
    event_type: schedule.event_type,
    environment: schedule.environment,
    payload: new RawJson(schedule.payload_json),
    enabled: schedule.enabled,
    created_at: schedule.created_at,
    updated_at: schedule.updated_at,
    last_sent_tick_at: schedule.last_sent_tick_ms === null ? null : new Date(schedule.last_sent_tick_ms).toISOString(),
    next_tick_at: next === undefined ? null : new Date(next).toISOString(),
  };
}
