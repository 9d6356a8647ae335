// REST: create, list, get, update and delete schedules (cron triggers that send events). Writes
// need the developer role, reads viewer; every request is scoped to one environment
// (`?environment=`), as for sources and workflows. Each write re-arms the ticker.

import { randomBytes } from 'node:crypto';
import { InputError } from '../errors.ts';
import { parseJsonRequestText } from '../http/parse-json.ts';
import { noContent, rawJson, type HttpRequest, type Route } from '../http/types.ts';
import { ENVIRONMENTS, EVENT_TYPE_PATTERN, type Environment } from '../sources/source-record.ts';
import type { Organization } from '../tenancy/organizations.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import {
  MAX_CRON_LENGTH,
  MAX_SCHEDULE_PAYLOAD_BYTES,
  SCHEDULE_NAME_PATTERN,
  checkSchedule,
  describeSchedule,
  type ScheduleRecord,
} from '../triggers/schedule-record.ts';
import type { ScheduleStore } from '../triggers/schedule-store.ts';
import type { ScheduleTicker } from '../triggers/schedule-ticker.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import { memberText } from '../validation/json-member-text.ts';
import { isoAt, type ApiContext } from './context.ts';
import { namedRecordReads } from './named-record-reads.ts';
import { recordPrecondition, recordTag } from './if-match.ts';
import { nextUpdateStamp } from '../update-stamp.ts';
import { ENVIRONMENT_QUERY, namedInEnvironment } from './query-params.ts';
import { assertNotReservedType } from '../triggers/device-record.ts';

interface ScheduleBody {
  name: string;
  cron: string;
  timezone?: string;
  event_type: string;
  payload?: unknown;
  environment?: Environment;
  enabled?: boolean;
}
type ScheduleUpdate = Partial<Omit<ScheduleBody, 'name' | 'environment'>>;

const fields = {
  cron: { type: 'string', minLength: 1, maxLength: MAX_CRON_LENGTH },
  timezone: { type: 'string', minLength: 1, maxLength: 64 },
  event_type: { type: 'string', pattern: EVENT_TYPE_PATTERN },
  payload: {},
  enabled: { type: 'boolean' },
};

const parseCreate = createBodyParser<ScheduleBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'cron', 'event_type'],
  properties: { name: { type: 'string', pattern: SCHEDULE_NAME_PATTERN }, environment: { type: 'string', enum: [...ENVIRONMENTS] }, ...fields },
});

// An empty update is refused: written, it moved the ETag, and others' If-Match failed for nothing.
const parseUpdate = createBodyParser<ScheduleUpdate>({ type: 'object', additionalProperties: false, minProperties: 1, properties: fields });

/** The payload member's JSON text as sent (null when absent), refused past MAX_SCHEDULE_PAYLOAD_BYTES. */
function payloadText(requestText: string, given: boolean): string {
  const text = given ? (memberText(requestText, 'payload') ?? 'null') : 'null';
  if (Buffer.byteLength(text) > MAX_SCHEDULE_PAYLOAD_BYTES) {
    throw new InputError(413, 'payload_too_large', `A schedule's payload is at most ${MAX_SCHEDULE_PAYLOAD_BYTES} bytes of JSON.`, { field: 'payload' });
  }
  return text;
}

export function scheduleRoutes(ctx: ApiContext, schedules: ScheduleStore, ticker: ScheduleTicker): Route[] {
  const base = '/organizations/:org_id/schedules';
  /** The schedule named by the path in the requested environment (`?environment=`, default production). */
  const requireSchedule = (request: HttpRequest, org: Organization): ScheduleRecord => namedInEnvironment(request, org, 'Schedule', (orgId, name) => schedules.require(orgId, name));
  return [
    {
      method: 'POST',
      pattern: base,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const parsed = parseJsonRequestText(request);
        const body = parseCreate(parsed.value);
        assertNotReservedType(body.event_type, 'event_type');
        const environment = body.environment ?? 'production';
        assertSandboxAllowed(org, environment);
        const { cron, timezone } = checkSchedule(body.cron, body.timezone ?? 'UTC');
        const nowMs = ctx.clock.now();
        const schedule: ScheduleRecord = {
          id: `sch_${randomBytes(12).toString('hex')}`,
          org_id: org.id,
          name: body.name,
          cron,
          timezone,
          event_type: body.event_type,
          environment,
          payload_json: payloadText(parsed.text, 'payload' in body),
          enabled: body.enabled ?? true,
          created_at: isoAt(nowMs),
          updated_at: isoAt(nowMs),
          last_tick_ms: nowMs,
          last_sent_tick_ms: null,
          started_ms: nowMs,
        };
        await schedules.create(schedule);
        ticker.arm(schedule);
        return rawJson(201, { schedule: describeSchedule(schedule, nowMs, ticker.dueAt(org.id, schedule.name)) }, recordTag(schedule));
      },
    },
    ...namedRecordReads(ctx, base, {
      plural: 'schedules',
      singular: 'schedule',
      what: 'Schedule',
      listAfter: (orgId, afterName) => schedules.listAfter(orgId, afterName),
      require: (orgId, name) => schedules.require(orgId, name),
      describe: (schedule) => describeSchedule(schedule, ctx.clock.now(), ticker.dueAt(schedule.org_id, schedule.name)),
    }),
    {
      method: 'PATCH',
      pattern: `${base}/:name`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const current = requireSchedule(request, org);
        const matches = recordPrecondition(request.headers['if-match'], 'schedule');
        const parsed = parseJsonRequestText(request);
        const update = parseUpdate(parsed.value);
        if (update.event_type !== undefined) assertNotReservedType(update.event_type, 'event_type');
        const payloadJson = 'payload' in update ? payloadText(parsed.text, true) : undefined;
        // Checked only when changed: a pattern stored under older rules can still be paused or edited.
        const retimed = update.cron !== undefined || update.timezone !== undefined;
        const checked = retimed ? checkSchedule(update.cron ?? current.cron, update.timezone ?? current.timezone) : current;
        // Merged onto the schedule as stored when the write runs (one made again under the name since,
        // in the other environment say, is not this one: 404). A new pattern, zone or an enabling
        // starts from now: ticks it would have had before are not owed. With If-Match, the schedule
        // stored then must be the one the client read (412 otherwise).
        const next = await schedules.update(org.id, current.name, (stored): ScheduleRecord | undefined => {
          if (stored.id !== current.id) return undefined;
          matches(stored);
          const merged: ScheduleRecord = {
            ...stored,
            ...(update.cron === undefined ? {} : { cron: checked.cron }),
            ...(update.timezone === undefined ? {} : { timezone: checked.timezone }),
            ...(update.event_type === undefined ? {} : { event_type: update.event_type }),
            ...(payloadJson === undefined ? {} : { payload_json: payloadJson }),
            ...(update.enabled === undefined ? {} : { enabled: update.enabled }),
            updated_at: nextUpdateStamp(stored.updated_at, ctx.clock.now()),
          };
          const restarts = merged.cron !== stored.cron || merged.timezone !== stored.timezone || (merged.enabled && !stored.enabled);
          const startMs = ctx.clock.now();
          return restarts ? { ...merged, last_tick_ms: startMs, started_ms: startMs } : merged;
        });
        ticker.arm(next);
        return rawJson(200, { schedule: describeSchedule(next, ctx.clock.now(), ticker.dueAt(next.org_id, next.name)) }, recordTag(next));
      },
    },
    {
      method: 'DELETE',
      pattern: `${base}/:name`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const addressed = requireSchedule(request, org);
        const { name, id } = addressed;
        // With If-Match, removed only as that tag names it (RFC 9110: a stale tag is 412 for a DELETE too).
        const matches = recordPrecondition(request.headers['if-match'], 'schedule');
        matches(addressed);
        await schedules.delete(org.id, name, id, matches);
        // A schedule made again under the name may have been armed already (its write in the same batch).
        const remade = schedules.get(org.id, name);
        if (remade === undefined) ticker.disarm(org.id, name);
        else ticker.arm(remade);
        return noContent();
      },
    },
  ];
}
