// POST /hooks/:org_id/:source — signed provider webhooks in, durable events out.
// Order: 404 source, 413 size, 415 type, 401 signature (400 for an unsigned header), 402 a sandbox source on a plan without one, 400 JSON, 422 schema (409 for a copy of a delivery stored before its schema changed), then one durable write on the quota (429).
// A large body is read in a thread (read-webhook-body.ts); ingest never parses the payload on the event loop.

import { DELETION_PENDING_RETRY_MS, InputError, notFound, RetryableError } from '../errors.ts';
import type { Clock } from '../clock.ts';
import type { EventStore } from '../events/event-store.ts';
import type { EventWriteTurns } from '../events/event-write-turns.ts';
import { generateEventId, rootEvent, type StoredEvent } from '../events/event-record.ts';
import { recordRequest } from '../events/record-request.ts';
import { errorCodeOf } from '../http/error-code.ts';
import { withLazyPayload, withPayloadText } from '../events/payload-text.ts';
import { isJsonContentType } from '../http/parse-json.ts';
import type { HttpRequest, Route } from '../http/types.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import type { SchemaChecks } from '../sources/schema-checks.ts';
import { DEFAULT_BODY_LIMIT_BYTES, EVENT_TYPE_REGEX, EVENT_TYPE_RULE, isSameSource, type SourceHead, type SourceRecord } from '../sources/source-record.ts';
import { isDeepStrictEqual } from 'node:util';
import type { SourceStore } from '../sources/source-store.ts';
import type { Organization, OrganizationStore } from '../tenancy/organizations.ts';
import type { IngestQuota } from './ingest-quota.ts';
import { readWebhookBody } from './read-webhook-body.ts';
import { assertNotReservedType } from '../triggers/device-record.ts';
import { isDeliveryId } from './verification.ts';
import { verifyDelivery } from './verify-delivery.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';

export interface HookRouteDeps {
  readonly orgs: OrganizationStore;
  readonly sources: SourceStore;
  readonly events: EventStore;
  readonly clock: Clock;
  readonly metrics: RuntimeMetrics;
  readonly quota: IngestQuota;
  /** A delivery is stored in its turn: after any sandbox reset of its org, within the budget of runs built (event-write-turns.ts). */
  readonly writeTurns: EventWriteTurns;
  /** Payloads are checked against the source's schema here, off the event loop (schema-checks.ts). */
  readonly schemaChecks: SchemaChecks;
  /** Large bodies are read (checked and parsed) here, off the event loop (read-webhook-body.ts). */
  readonly bodyReads: SchemaChecks;
}

export function hookRoutes(deps: HookRouteDeps): Route[] {
  // Up to the signature check only the source's head is read (no schemas: anyone may post here).
  const lookupHead = (params: Readonly<Record<string, string>>): Target<SourceHead> | undefined => {
    const org = deps.orgs.get(params.org_id ?? '');
    const source = org === undefined ? undefined : deps.sources.head(org.id, params.source ?? '');
    return source === undefined || org === undefined ? undefined : { org, source };
  };
  const lookup = (params: Readonly<Record<string, string>>): Target | undefined => {
    const org = deps.orgs.get(params.org_id ?? '');
    const source = org === undefined ? undefined : deps.sources.get(org.id, params.source ?? '');
    return source === undefined || org === undefined ? undefined : { org, source };
  };
  // A source whose delete is being written is no target any more, but may stay (the write may fail):
  // what comes meanwhile stored nothing and is to be sent again, not told the source is gone.
  const missing = (params: Readonly<Record<string, string>>): Error => {
    const org = deps.orgs.get(params.org_id ?? '');
    if (org === undefined || !deps.sources.isDeleting(org.id, params.source ?? '')) return notFound('Organization or source');
    return new RetryableError('source_deletion_pending', 'The source is being deleted; nothing was stored. Should its deletion fail, send this again.', DELETION_PENDING_RETRY_MS);
  };
  const countRefusal = (error: unknown): void => {
    deps.metrics.ingestTotal.inc({ outcome: errorCodeOf(error) });
  };
  return [
    {
      method: 'POST',
      pattern: '/hooks/:org_id/:source',
      // A provider posts to the URL it was given, which may carry parameters of its own.
      query: 'any',
      metricName: 'ingest',
      readsLargeBodiesInThread: true,
      bodyLimit: (params) => lookupHead(params)?.source.body_limit_bytes ?? DEFAULT_BODY_LIMIT_BYTES,
      // An unknown org or source is answered before its body is read.
      beforeBody: (head) => {
        if (lookupHead(head.params) === undefined) throw missing(head.params);
      },
      // Deliveries refused before the handler (unknown source, body too large or too slow) count too.
      onRefused: countRefusal,
      handler: async (request) => {
        try {
          const { params } = request;
          const event = await ingest(deps, () => found(lookupHead(params), () => missing(params)), () => found(lookup(params), () => missing(params)), request);
          deps.metrics.ingestTotal.inc({ outcome: 'accepted' });
          return { status: 204, headers: { 'sluice-event-id': event.id } };
        } catch (error) {
          countRefusal(error);
          throw error;
        }
      },
    },
  ];
}

/** The org and source (whole, or its head) a hook path names. */
interface Target<S extends SourceHead = SourceRecord> {
  readonly org: Organization;
  readonly source: S;
}

/** The org and source, if both exist (`missing()` is thrown otherwise). */
function found<S extends SourceHead>(target: Target<S> | undefined, missing: () => Error): Target<S> {
  if (target === undefined) throw missing();
  return target;
}

/**
 * `lookupHead` reads the path's org and source head, for the checks up to the signature; `lookup`
 * the whole source, after it and again after each wait (a body read, a schema check, a sandbox reset).
 * Each throws when the org or the source is gone (404) or the source's delete is being written (503).
 */
async function ingest(deps: HookRouteDeps, lookupHead: () => Target<SourceHead>, lookup: () => Target, request: HttpRequest): Promise<StoredEvent> {
  const { org, source } = lookupHead();
  if (!isJsonContentType(request.headers['content-type'])) {
    throw new InputError(415, 'unsupported_media_type', 'Webhook bodies must be JSON (Content-Type: application/json).');
  }
  const nowMs = deps.clock.now();
  const delivery = verifyDelivery(source, request.headers, request.body, nowMs);
  // Only a signed delivery learns the org's plan (402 on a plan without a sandbox).
  assertSandboxAllowed(org, source.environment);
  // A source whose secrets changed during a wait verifies the delivery again: a secret removed
  // (leaked, say) signs nothing stored after its removal is durable. The recording names the key
  // of the last check (the list may have been reordered).
  let keyIndex = delivery.keyIndex;
  const reverify = (changed: SourceHead): void => {
    keyIndex = verifyDelivery(changed, request.headers, request.body, nowMs).keyIndex;
  };
  const { text: payloadJson, facts, parsed } = await readWebhookBody(request.body, org.id, deps.bodyReads);
  // The whole source, schemas included; a large body was read in a thread, and the source may have
  // changed or gone meanwhile (or since its head was read).
  const current = sourceAfterWait(source, source, lookup, reverify);
  if (!facts.object) throw new InputError(400, 'invalid_payload', 'The webhook body must be a JSON object.');
  const providerEventId = delivery.providerEventId ?? bodyString(facts.id, 'id');
  const type = delivery.eventType ?? bodyString(facts.type, 'type');
  if (!EVENT_TYPE_REGEX.test(type)) throw new InputError(400, 'invalid_event_type', EVENT_TYPE_RULE, { field: 'type' });
  assertNotReservedType(type, 'type');
  const claim = { source: source.name, providerEventId };
  // A copy of a delivery stored before its source's schema changed is a duplicate (409: the
  // provider stops sending it), not a refusal of what was stored.
  const checkedOrStored = (version: SourceRecord): Promise<SourceRecord> =>
    deps.events.unlessStored(checkSchema(deps.schemaChecks, source, version, type, payloadJson, lookup, reverify), org.id, claim, nowMs);
  let checked = await checkedOrStored(current);
  const receivedAt = new Date(nowMs).toISOString();
  const id = generateEventId(nowMs);
  // A small body parsed here is kept as the payload: a lazy getter (for one read in a thread) made
  // every event object slower to use (alternating ingest runs: about +8 % without it).
  const fields = { id, org_id: source.org_id, type, environment: source.environment, source: source.name, provider_event_id: providerEventId, received_at_ms: nowMs };
  const event = parsed === undefined ? withLazyPayload(rootEvent({ ...fields, payload: undefined }), payloadJson) : withPayloadText(rootEvent({ ...fields, payload: parsed.value }), payloadJson);
  // Stored in its turn (after any sandbox reset of the org, within the budget of runs built), with
  // no await between the turn and the store (storeEvent starts it at once): event-write-turns.ts.
  // A turn can wait seconds (a reset): meanwhile the source may have been deleted (or made again),
  // lost a secret or changed its schemas, or the plan lost its sandbox, so it is read and judged
  // again as after any wait; a changed source is checked again, its turn given back meanwhile.
  let turn = await deps.writeTurns.take(org.id, source.environment, type);
  try {
    while (turn.waited) {
      const now = sourceAfterWait(source, checked, lookup, reverify);
      if (now.updated_at === checked.updated_at) break;
      turn.release();
      checked = await checkedOrStored(now);
      turn = await deps.writeTurns.take(org.id, source.environment, type);
    }
    const recording = recordRequest(request.method, request.path, request.headers, request.body, { scheme: source.scheme, key_index: keyIndex }, receivedAt);
    const started = performance.now();
    // Only stored deliveries count against the quota: anyone can post to a hook URL, and neither
    // unsigned requests nor replayed copies of a signed one may lock the tenant's real provider out.
    const stored = await deps.quota.storeEvent(org, deps.events, { event, payloadJson, recording, claim });
    deps.metrics.ledgerCommitSeconds.observe({ operation: 'ingest' }, (performance.now() - started) / 1000);
    return stored;
  } finally {
    turn.release();
  }
}

/**
 * Checks the payload against the source's schema for its type in the checking thread (most types
 * declare none: no wait). The wait may be long, and the source deleted or changed meanwhile: it is
 * read again after each check; a changed one checks again, and a deleted one (or one made again
 * under the name: another source, with its own delivery ids) is 404, so the provider sends again.
 * Resolves with the version last checked.
 */
async function checkSchema(checks: SchemaChecks, source: SourceHead, current: SourceRecord, type: string, payloadJson: string, lookup: () => Target, reverify: (changed: SourceHead) => void): Promise<SourceRecord> {
  let checked = current;
  for (;;) {
    const checking = checks.check(checked, type, payloadJson);
    if (checking === undefined) return checked;
    await checking;
    const now = sourceAfterWait(source, checked, lookup, reverify);
    if (now.updated_at === checked.updated_at) return checked;
    checked = now;
  }
}

/**
 * The delivery's source as it is after a wait: 404 when it was deleted (or made again under the
 * name: another source, with its own delivery ids), so the provider sends again; the delivery is
 * verified again when its secrets changed since `checked`, the version last seen; then 402 if the
 * plan lost its sandbox meanwhile (only a delivery still signed learns that).
 */
function sourceAfterWait(source: SourceHead, checked: SourceHead, lookup: () => Target, reverify: (changed: SourceHead) => void): SourceRecord {
  const { org, source: current } = lookup();
  if (!isSameSource(current, source)) throw notFound('Organization or source');
  if (current.updated_at !== checked.updated_at && !isDeepStrictEqual(current.secrets, checked.secrets)) reverify(current);
  assertSandboxAllowed(org, current.environment);
  return current;
}

/** The body's top-level `id` or `type` (undefined when it is not a string), as the event's. */
function bodyString(value: string | undefined, field: 'id' | 'type'): string {
  // An id becomes the dedup key, like a webhook-id header, and is checked as one.
  // A type of any length is judged by EVENT_TYPE_REGEX after this (a 300-character one is invalid_event_type, not missing).
  if (field === 'id' && typeof value === 'string' && value !== '' && !isDeliveryId(value)) {
    throw new InputError(400, 'invalid_event_id', 'The webhook body\'s "id" must be 1-256 printable ASCII characters, no spaces (it is the delivery\'s dedup key).', { field });
  }
  if (typeof value !== 'string' || value === '') {
    const what = field === 'id' ? 'The webhook body needs a string "id" (1-256 printable ASCII characters).' : `The webhook body needs a string "type". ${EVENT_TYPE_RULE}`;
    throw new InputError(400, field === 'id' ? 'missing_event_id' : 'missing_event_type', what, { field });
  }
  return value;
}
