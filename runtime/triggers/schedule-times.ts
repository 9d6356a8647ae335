// When a schedule's pattern ticks in its time zone: croner's walk, plus the fixed-time ticks that a
// spring-forward gap ending at local midnight skips (croner sends those only within one local date).

import { Cron, CronPattern } from 'croner';
import { setNewest } from '../newest-entries.ts';
import { zoneGapsBetween } from './zone-gaps.ts';

/** What the times of a schedule depend on. */
export interface SchedulePattern {
  readonly cron: string;
  /** IANA time zone the pattern is read in. */
  readonly timezone: string;
}

/**
 * The pattern as croner reads it (paused: it only computes times, never runs anything). Hours given
 * as lists or ranges count as fixed times across daylight saving, as single hours do: a tick in a
 * skipped hour fires once when the hour ends, and a repeated hour fires once. Days match as in
 * crontab (Vixie cron, cronie): a day must match both day fields when either starts with `*` (a
 * day-of-month step and a weekday: days that are both), and either one when both are restricted
 * (croner's default).
 */
export function cronOf(schedule: SchedulePattern): Cron {
  const key = `${schedule.cron}\u0000${schedule.timezone}`;
  let cron = parsedPatterns.get(key);
  if (cron === undefined) {
    cron = new Cron(schedule.cron, { timezone: schedule.timezone, paused: true, mode: '5-part', fixedTimeRule: 'no-wildcard', domAndDow: eitherDayFieldStarred(schedule.cron) });
    setNewest(parsedPatterns, key, cron, MAX_PARSED_PATTERNS);
  }
  return cron;
}

/**
 * Patterns read by croner, by pattern and zone, the oldest read dropped past MAX_PARSED_PATTERNS:
 * reading one takes ~20-40 us, and a tick asks for its schedule's three times (thousands of
 * schedules share a few patterns, `@hourly`, `* * * * *`). A paused Cron without a function keeps
 * no state between calls, so one serves every schedule of its pattern.
 */
const parsedPatterns = new Map<string, Cron>();
const MAX_PARSED_PATTERNS = 1024;

/** Whether the day-of-month or day-of-week field of a five-field pattern starts with `*` (a nickname has none). */
export function eitherDayFieldStarred(cron: string): boolean {
  // As croner splits: a pattern stored before other space characters were refused reads as it did.
  const fields = cron.trim().split(/\s+/);
  return fields.length === 5 && (fields[2]!.startsWith('*') || fields[4]!.startsWith('*'));
}

/** The first tick after `afterMs`; undefined: never again. */
export function nextTick(schedule: SchedulePattern, afterMs: number): number | undefined {
  const next = cronOf(schedule).nextRun(new Date(afterMs))?.getTime();
  if (next === undefined) return undefined;
  return gapTicks(schedule, afterMs, next)[0] ?? next;
}

/** The first `count` ticks after `afterMs`, oldest first. */
export function nextTicks(schedule: SchedulePattern, count: number, afterMs: number): number[] {
  const ticks = cronOf(schedule).nextRuns(count, new Date(afterMs)).map((at) => at.getTime());
  if (ticks.length === 0) return ticks;
  return mergedTicks(ticks, gapTicks(schedule, afterMs, ticks[ticks.length - 1]!)).slice(0, count);
}

/** The newest `count` ticks before `beforeMs`, newest first. */
export function previousTicks(schedule: SchedulePattern, count: number, beforeMs: number): number[] {
  const ticks = cronOf(schedule).previousRuns(count, new Date(beforeMs)).map((at) => at.getTime());
  if (ticks.length === 0) return ticks;
  return mergedTicks(ticks, gapTicks(schedule, ticks[ticks.length - 1]!, beforeMs - 1)).reverse().slice(0, count);
}

/** Both lists' ticks once each, oldest first. */
function mergedTicks(ticks: readonly number[], more: readonly number[]): number[] {
  return [...new Set([...ticks, ...more])].sort((a, b) => a - b);
}

/**
 * The ticks of a fixed-time pattern (no `*` or step in its minute and hour fields: croner's
 * `no-wildcard` rule) that fall in a spring-forward gap at an instant in (`afterMs`,
 * `untilMs`], each sent when the gap ends, as croner does within one local date: a gap that ends
 * at local midnight (America/Nuuk, America/Scoresbysund: 23:00 goes to 00:00) is passed over by
 * croner's walk, which never looks back at the date before. A gap croner does fire in gives the
 * same instant, and the merge keeps it once. Interval patterns skip gap times, as in crontab.
 */
function gapTicks(schedule: SchedulePattern, afterMs: number, untilMs: number): number[] {
  if (!isFixedTime(schedule.cron) || untilMs <= afterMs) return [];
  // The pattern read without daylight saving, to ask whether it names a wall-clock time in a gap
  // (one more parsed pattern per fixed-time one: at most twice the patterns in use are kept).
  const wallClock = cronOf({ cron: schedule.cron, timezone: 'UTC' });
  return zoneGapsBetween(schedule.timezone, afterMs, untilMs)
    .filter((gap) => (wallClock.nextRun(new Date(gap.skippedFromWallMs - 1))?.getTime() ?? Infinity) < gap.skippedUntilWallMs)
    .map((gap) => gap.atMs);
}

/** Whether croner counts the pattern a fixed-time job (its own `no-wildcard` rule, asked of croner so the two agree). */
function isFixedTime(cron: string): boolean {
  let fixed = fixedTimes.get(cron);
  if (fixed === undefined) {
    fixed = new CronPattern(cron, undefined, { mode: '5-part', fixedTimeRule: 'no-wildcard' }).isFixedTime;
    setNewest(fixedTimes, cron, fixed, MAX_PARSED_PATTERNS);
  }
  return fixed;
}

/** Whether each pattern is a fixed-time one, by pattern (any zone). */
const fixedTimes = new Map<string, boolean>();
