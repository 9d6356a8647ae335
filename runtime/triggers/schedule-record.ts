// A schedule: a cron pattern in a time zone that sends one event of a given type at each tick.
// Patterns have five fields (minute resolution) or a nickname such as `@hourly`; croner parses them
// and walks time zones and daylight saving. The ticks it sends are events like any other.

import { createHash } from 'node:crypto';
import { Cron } from 'croner';
import { badRequest } from '../errors.ts';
import { RawJson } from '../validation/raw-json.ts';
import type { Environment } from '../sources/source-record.ts';

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
   * passed over. A tick at or before it never sends again; creating and enabling set it to now.
   */
  readonly last_tick_ms: number;
  /** The tick of the newest event the schedule sent, if it sent any. */
  readonly last_sent_tick_ms: number | null;
}

const NICKNAME = /^@(yearly|annually|monthly|weekly|daily|hourly)$/;

/** The pattern as croner reads it (paused: it only computes times, never runs anything). */
const cronOf = (schedule: Pick<ScheduleRecord, 'cron' | 'timezone'>): Cron => new Cron(schedule.cron, { timezone: schedule.timezone, paused: true });

/** Throws 400 naming the field unless the pattern has five fields (or is a nickname), fires at all, and the zone is known. */
export function assertScheduleValid(cron: string, timezone: string): void {
  try {
    new Intl.DateTimeFormat('en', { timeZone: timezone });
  } catch {
    throw badRequest('invalid_timezone', `"${timezone}" is not an IANA time zone (for example "UTC" or "Europe/Berlin").`, 'timezone');
  }
  const trimmed = cron.trim();
  if (!NICKNAME.test(trimmed) && trimmed.split(/\s+/).length !== 5) {
    throw badRequest('invalid_cron', 'A cron pattern has five fields (minute hour day-of-month month day-of-week) or is one of @yearly, @monthly, @weekly, @daily, @hourly.', 'cron');
  }
  let next: Date | null;
  try {
    next = cronOf({ cron: trimmed, timezone }).nextRun();
  } catch (error) {
    throw badRequest('invalid_cron', `The cron pattern cannot be read: ${error instanceof Error ? error.message : String(error)}`.slice(0, 300), 'cron');
  }
  if (next === null) throw badRequest('invalid_cron', 'The cron pattern never fires (for example February 30th).', 'cron');
}

/** The first tick strictly after `afterMs`, or undefined if there is none. */
export function tickAfter(schedule: ScheduleRecord, afterMs: number): number | undefined {
  return cronOf(schedule).nextRun(new Date(afterMs))?.getTime();
}

/** The newest tick at or before `nowMs` and after the schedule's `last_tick_ms`: the one tick owed now, if any. */
export function tickOwed(schedule: ScheduleRecord, nowMs: number): number | undefined {
  const [latest] = cronOf(schedule).previousRuns(1, new Date(nowMs + 1));
  const at = latest?.getTime();
  return at !== undefined && at > schedule.last_tick_ms ? at : undefined;
}

/** The deterministic id of the event a schedule sends for the tick at `tickMs`. */
export const tickEventId = (schedule: ScheduleRecord, tickMs: number): string =>
  `evt_sch_${createHash('sha256').update(`${schedule.id}\u0000${tickMs}`).digest('hex').slice(0, 32)}`;

/** The API view (answer it with rawJson): the record without its internal fields, with the next tick when enabled. */
export function describeSchedule(schedule: ScheduleRecord): Record<string, unknown> {
  const next = schedule.enabled ? tickAfter(schedule, schedule.last_tick_ms) : undefined;
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
