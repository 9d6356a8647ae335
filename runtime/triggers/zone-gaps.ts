// The spring-forward gaps of an IANA time zone: when its clocks jump ahead and which wall-clock
// times that jump skips. Read from Intl (the ICU time zone data Node ships), found by bisection.

import { setNewest } from '../newest-entries.ts';

/** A forward jump: at `atMs` the wall clock goes from `skippedFromWallMs` straight to `skippedUntilWallMs`. */
export interface ZoneGap {
  readonly atMs: number;
  /** Wall-clock times written as if in UTC (Date.UTC of the local fields): the skipped ones are [from, until). */
  readonly skippedFromWallMs: number;
  readonly skippedUntilWallMs: number;
}

/**
 * How far apart offsets are compared, in windows of a UTC year from its January 1st. Two changes
 * (forward and back again) within one window would hide each other. In the time zone data only
 * America/Boa_Vista, Noronha and Recife changed twice within a week (forward October 8th, back
 * October 15th 2000, 6 days 23 hours apart), and that year's windows split the two
 * (test/triggers/zone-gaps.test.ts). A day would leave no doubt, but cost 365 offsets (~4 ms) a
 * zone and year, and a look-back over many years (100 ticks of February 29th span 400) ~1.5 s.
 */
const SPAN_MS = 7 * 24 * 60 * 60_000;

/** The zone's forward jumps at instants in (`afterMs`, `untilMs`], oldest first. */
export function zoneGapsBetween(timezone: string, afterMs: number, untilMs: number): ZoneGap[] {
  const gaps: ZoneGap[] = [];
  for (let year = new Date(afterMs).getUTCFullYear(); year <= new Date(untilMs).getUTCFullYear(); year++) {
    for (const gap of gapsOfYear(timezone, year)) if (gap.atMs > afterMs && gap.atMs <= untilMs) gaps.push(gap);
  }
  return gaps;
}

/**
 * The zone's forward jumps at instants in (January 1st, next January 1st] of a UTC year, worked out
 * once (~0.5 ms: one offset a week, then bisection to the second) and kept: a yearly pattern's wait
 * spans a year and is asked for at every tick and arming.
 */
function gapsOfYear(timezone: string, year: number): readonly ZoneGap[] {
  const key = `${timezone}\u0000${year}`;
  let gaps = yearGaps.get(key);
  if (gaps === undefined) {
    const found: ZoneGap[] = [];
    const untilMs = Date.UTC(year + 1, 0, 1);
    let from = Date.UTC(year, 0, 1);
    let fromOffset = offsetMs(timezone, from);
    while (from < untilMs) {
      const to = Math.min(from + SPAN_MS, untilMs);
      const toOffset = offsetMs(timezone, to);
      if (toOffset > fromOffset) {
        const atMs = firstInstantWithOffset(timezone, from, to, toOffset);
        found.push({ atMs, skippedFromWallMs: atMs + fromOffset, skippedUntilWallMs: atMs + toOffset });
      }
      from = to;
      fromOffset = toOffset;
    }
    gaps = found;
    setNewest(yearGaps, key, gaps, MAX_YEARS_KEPT);
  }
  return gaps;
}

/** Each zone's gaps by year; a year's list is a few entries at most. */
const yearGaps = new Map<string, readonly ZoneGap[]>();
const MAX_YEARS_KEPT = 4096;

/** The first instant in (`fromMs`, `toMs`] whose offset is `offset` (it holds at `toMs`, not at `fromMs`), to the second. */
function firstInstantWithOffset(timezone: string, fromMs: number, toMs: number, offset: number): number {
  let before = fromMs;
  let at = toMs;
  while (at - before > 1_000) {
    const middle = Math.floor((before + at) / 2_000) * 1_000;
    if (middle <= before) break;
    if (offsetMs(timezone, middle) === offset) at = middle;
    else before = middle;
  }
  return at;
}

/** How far the zone's wall clock is ahead of UTC at `atMs` (negative west of Greenwich), to the second. */
export function offsetMs(timezone: string, atMs: number): number {
  const fields: Record<string, number> = {};
  for (const part of formatterOf(timezone).formatToParts(atMs)) if (part.type !== 'literal') fields[part.type] = Number(part.value);
  const wall = Date.UTC(fields['year']!, fields['month']! - 1, fields['day']!, fields['hour']!, fields['minute']!, fields['second']!);
  return wall - (atMs - (((atMs % 1_000) + 1_000) % 1_000));
}

function formatterOf(timezone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timezone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    setNewest(formatters, timezone, formatter, MAX_FORMATTERS);
  }
  return formatter;
}

/** Formatters by zone (building one takes ~50 us); the zones in use are few. */
const formatters = new Map<string, Intl.DateTimeFormat>();
const MAX_FORMATTERS = 256;
