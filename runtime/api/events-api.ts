// REST: send a custom event, get one (with its recording, reactions and replays), list by time (by type and source too).
// Every read is scoped to one environment (`?environment=`, default production).

import { createHash } from 'node:crypto';
import { InputError } from '../errors.ts';
import { parseIdempotencyKey } from './idempotency-key.ts';
import { API_SOURCE, assertNotReservedEventId, EVENT_ID_PATTERN, generateEventId, isReservedEventId, rootEvent } from '../events/event-record.ts';
import { eventWithRawPayload, withLazyPayload, withPayloadText } from '../events/payload-text.ts';
import { assertJsonRequest, decodeUtf8, parseJsonRequestText } from '../http/parse-json.ts';
import { rawJson, type HttpRequest, type Route } from '../http/types.ts';
import { THREAD_READ_BYTES } from '../ingest/read-webhook-body.ts';
import type { SchemaChecks } from '../sources/schema-checks.ts';
import { memberText } from '../validation/json-member-text.ts';
import { ENVIRONMENTS, EVENT_TYPE_PATTERN, EVENT_TYPE_REGEX, EVENT_TYPE_RULE, type Environment } from '../sources/source-record.ts';
import { summarizeRun } from '../runs/run-summary.ts';
import { encodeCursor, ENVIRONMENT_QUERY, environmentOf, parseCursor, parseLimit } from './query-params.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import type { IngestQuota } from '../ingest/ingest-quota.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import type { ApiContext } from './context.ts';
import { assertNotReservedType } from '../triggers/device-record.ts';

interface SendEventBody {
  type: string;
  payload: unknown;
  environment?: Environment;
  id?: string;
}

const parseSend = createBodyParser<SendEventBody>({
  type: 'object',
  additionalProperties: false,
  required: ['type', 'payload'],
  properties: {
    type: { type: 'string', pattern: EVENT_TYPE_PATTERN },
    payload: {},
    environment: { type: 'string', enum: [...ENVIRONMENTS] },
    id: { type: 'string', pattern: EVENT_ID_PATTERN },
  },
});

/**
 * The body of `POST …/events`, judged by parseSend: a small one parsed here; one of THREAD_READ_BYTES
 * or more checked and parsed in the body-reading thread, which answers its top level (its payload
 * left out: `payloadParsed` false), since parsing 1 MiB on the event loop (~160 ms) held every org.
 */
async function readSentEvent(request: HttpRequest, orgId: string, bodies: SchemaChecks): Promise<{ sent: SendEventBody; text: string; payloadParsed: boolean }> {
  if (request.body.length < THREAD_READ_BYTES) {
    const parsed = parseJsonRequestText(request);
    return { sent: parseSend(parsed.value), text: parsed.text, payloadParsed: true };
  }
  assertJsonRequest(request);
  const text = decodeUtf8(request.body);
  return { sent: parseSend(await bodies.readApiBody(orgId, text)), text, payloadParsed: false };
}

/** The newest replays an event's view lists (older ones: the list's `?source=@replay`, by causation_id). */
const LISTED_REPLAYS = 20;

const EVENT_ID = new RegExp(EVENT_ID_PATTERN);

/**
 * The event's id: the body's `id` when it has one, else what an `Idempotency-Key` header names,
 * which clients send to make retries safe and which an event's id already does (a repeat is 409
 * duplicate_event; the header was ignored, so a retried request made two events). A key that is
 * an event id outside Sluice's own namespaces is used as it is; any other (the replay API's rule:
 * 1-255 printable ASCII, so one scheme serves both) names the event `key_<its SHA-256, 40 hex digits>`.
 */
function eventIdOf(bodyId: string | undefined, header: string | undefined): string | undefined {
  // With an id in the body the header is not read (README), however it is spelled.
  if (bodyId !== undefined) return bodyId;
  const key = parseIdempotencyKey(header);
  if (key === undefined) return undefined;
  // Another Sluice's event id, forwarded as the key, is in this one's namespaces: hashed too.
  return EVENT_ID.test(key) && !isReservedEventId(key) ? key : `key_${createHash('sha256').update(key).digest('hex').slice(0, 40)}`;
}

export function eventRoutes(ctx: ApiContext, quota: IngestQuota): Route[] {
  const base = '/organizations/:org_id/events';
  return [
    {
      method: 'POST',
      pattern: base,
      readsLargeBodiesInThread: true,
      handler: async (request) => {
        const caller = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const { sent, text, payloadParsed } = await readSentEvent(request, caller.id, ctx.schemas.bodies);
        // A large body waited its turn in the reading thread (behind the org's large webhooks): the
        // key may have been revoked, the org deleted or its plan changed meanwhile. A small one did not wait.
        const org = payloadParsed ? caller : ctx.auth.requireOrg(request, caller.id, 'developer');
        const body = { ...sent, id: eventIdOf(sent.id, request.headers['idempotency-key']) };
        assertNotReservedType(body.type, 'type');
        if (body.id !== undefined) assertNotReservedEventId(body.id, sent.id === undefined ? 'Idempotency-Key' : 'id');
        assertSandboxAllowed(org, body.environment ?? 'production');
        const environment = body.environment ?? 'production';
        // Stored in its turn (after any sandbox reset of the org, within the budget of runs built),
        // with no await between the turn and the store: the runs then take the generation their
        // event lives in (sandbox-generation.ts).
        const turn = await ctx.writeTurns.take(org.id, environment, body.type);
        try {
          // The key may have been revoked, the org deleted or its plan lost the sandbox while it waited.
          const current = turn.waited ? ctx.auth.requireOrg(request, org.id, 'developer') : org;
          assertSandboxAllowed(current, environment);
          const nowMs = ctx.clock.now();
          const id = body.id ?? generateEventId(nowMs);
          const fields = { id, org_id: current.id, type: body.type, environment, source: API_SOURCE, provider_event_id: body.id ?? null, received_at_ms: nowMs };
          const payloadText = memberText(text, 'payload') ?? 'null';
          // A large body's payload was parsed in the thread, not here: parsed again only if read.
          const event = payloadParsed ? withPayloadText(rootEvent({ ...fields, payload: body.payload ?? null }), payloadText) : withLazyPayload(rootEvent({ ...fields, payload: undefined }), payloadText);
          await quota.storeEvent(current, ctx.events, { event, recording: null, claim: null });
          ctx.metrics.ingestTotal.inc({ outcome: 'accepted_api' });
          return rawJson(202, { event: eventWithRawPayload(event) });
        } finally {
          turn.release();
        }
      },
    },
    {
      method: 'GET',
      pattern: base,
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const type = request.query.get('type') ?? undefined;
        const source = request.query.get('source') ?? undefined;
        // A type no event can have is a typo, not an empty list.
        if (type !== undefined && !EVENT_TYPE_REGEX.test(type)) throw new InputError(400, 'invalid_event_type', `The type filter names no event type any event can have. ${EVENT_TYPE_RULE}`, { field: 'type' });
        // A source is a source's name or a trigger's (`@api`, `@schedule`, `@device:<name>`, ...).
        if (source !== undefined && !/^[\x21-\x7e]{1,100}$/.test(source)) {
          throw new InputError(400, 'invalid_source', 'source must be 1-100 printable ASCII characters: a source name, or @api, @schedule, @device:<name>, ...', { field: 'source' });
        }
        const cursor = parseCursor(request);
        const page = ctx.events.list(org.id, environmentOf(request, org), {
          limit: parseLimit(request),
          ...(type === undefined ? {} : { type }),
          ...(source === undefined ? {} : { source }),
          ...(cursor === undefined ? {} : { cursor }),
        });
        return rawJson(200, { events: page.events.map(eventWithRawPayload), next_cursor: page.nextCursor === null ? null : encodeCursor(request, page.nextCursor) });
      },
    },
    {
      method: 'GET',
      pattern: `${base}/:event_id`,
      query: ENVIRONMENT_QUERY,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const event = ctx.events.require(org.id, request.params.event_id ?? '', environmentOf(request, org));
        return rawJson(200, {
          event: eventWithRawPayload(event),
          recording: ctx.events.recording(org.id, event.id) ?? null,
          reactions: ctx.runs.forEvent(org.id, event.id, summarizeRun),
          // Where its business replays went (each one's runs are on its own view).
          replays: ctx.events.replays.newest(org.id, event.environment, event.id, LISTED_REPLAYS),
        });
      },
    },
  ];
}
