// Transport replay (DESIGN 5): feeds a recorded request back through parsing and routing to explain
// what ingest would do with it today. It creates nothing; the signature is not re-checked because
// recordings never keep signatures (they are redacted).

import { InputError, SluiceError } from '../errors.ts';
import type { Inbox } from '../inbox/inbox.ts';
import type { Recording, StoredEvent } from '../events/event-record.ts';
import { decodeJsonBytes } from '../http/parse-json.ts';
import { payloadTextOf } from '../events/payload-text.ts';
import type { SchemaChecks } from '../sources/schema-checks.ts';
import type { SourceRecord } from '../sources/source-record.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';

export interface TransportReplayReport {
  readonly event_id: string;
  readonly source: string;
  /**
   * What ingest would answer for this request today: 204 stored, 409 duplicate, 404 source gone,
   * 402 a sandbox source of an org whose plan has no sandbox (now), 413 over the source's body
   * limit (changed since), 400 unparsable, 422 schema. (Its content type was JSON, or ingest would
   * not have stored it.)
   */
  readonly would_answer: { readonly status: 204 | 400 | 402 | 404 | 409 | 413 | 422; readonly code: string | null };
  /** The environment ingest would store it in today: the source's (it may have been recreated in the other one); null when gone. */
  readonly environment: string | null;
  readonly parsed: boolean;
  readonly type: string | null;
  /** `ok: null`: not checked, because the source is gone or the body does not parse. */
  readonly schema:
    | { readonly ok: true }
    | { readonly ok: false; readonly code: string; readonly field: string | null; readonly message: string }
    | { readonly ok: null; readonly reason: 'source_deleted' | 'body_unparsable' };
  readonly dedup: { readonly provider_event_id: string | null; readonly duplicate_of: string | null };
  /** The workflows the event's type matches today, in `environment`; none when the source is gone. */
  readonly would_trigger: ReadonlyArray<{ readonly workflow_id: string; readonly version: number; readonly name: string }>;
  readonly signature: 'not_rechecked_recordings_hold_no_signatures';
}

export interface TransportReplayDeps {
  readonly source: SourceRecord | undefined;
  /** The payload is checked against the source's schema as ingest checks it. */
  readonly schemaChecks: SchemaChecks;
  /** The org's plan has a sandbox today (sandbox-guard.ts). */
  readonly sandboxAllowed: boolean;
  readonly inbox: Inbox;
  readonly matching: (type: string, environment: string) => readonly WorkflowVersion[];
  readonly nowMs: number;
}

export async function explainTransportReplay(event: StoredEvent, recording: Recording | undefined, deps: TransportReplayDeps): Promise<TransportReplayReport> {
  if (recording === undefined) {
    throw new InputError(409, 'no_recording', 'This event has no recorded request (it was not received as a webhook); nothing to replay.');
  }
  // A recording keeps at most 64 KiB of the body; the event's payload text is the whole body, as
  // received. The text is what is checked, as ingest checks it: parsed and written out again, a
  // number JSON cannot hold (1e400) would be checked as null.
  let text = payloadTextOf(event);
  let parsed = true;
  if (!recording.body_truncated) {
    try {
      // Decoded as ingest decodes it (a byte-order mark dropped), so the text is the one ingest checked.
      text = decodeJsonBytes(Buffer.from(recording.body, 'utf8')).text;
    } catch {
      parsed = false;
    }
  }
  const { source } = deps;
  const schema = await checkSchema(deps.schemaChecks, source, parsed, event.type, text);
  const claim = event.provider_event_id === null ? undefined : deps.inbox.liveClaim(event.org_id, event.source, event.provider_event_id, deps.nowMs);
  return {
    event_id: event.id,
    source: event.source,
    would_answer: wouldAnswer(source, deps.sandboxAllowed, recording, parsed, schema, claim !== undefined),
    environment: source?.environment ?? null,
    parsed,
    type: parsed ? event.type : null,
    schema,
    dedup: { provider_event_id: event.provider_event_id, duplicate_of: claim?.event_id ?? null },
    would_trigger: source === undefined ? [] : deps.matching(event.type, source.environment).map((v) => ({ workflow_id: v.workflow_id, version: v.version, name: v.definition.name })),
    signature: 'not_rechecked_recordings_hold_no_signatures',
  };
}

/** The payload against the source's schema today, as ingest checks it (schema-checks.ts); not checked when the source is gone or the body does not parse. */
async function checkSchema(checks: SchemaChecks, source: SourceRecord | undefined, parsed: boolean, type: string, text: string): Promise<TransportReplayReport['schema']> {
  if (source === undefined) return { ok: null, reason: 'source_deleted' };
  if (!parsed) return { ok: null, reason: 'body_unparsable' };
  try {
    await checks.check(source, type, text);
    return { ok: true };
  } catch (error) {
    // Only a refusal of the payload is an answer ingest would give it; a check that could not be
    // made (the checking thread busy, Sluice stopping) fails the request instead of reading as a 422.
    if (!(error instanceof SluiceError) || error.status >= 500) throw error;
    return { ok: false, code: error.code, field: error.field ?? null, message: error.message };
  }
}

/** Ingest's order (server.ts reads the body within the source's limit before hook-routes.ts runs): unknown source, size, (the signature, not checked again here), the plan's sandbox, then the body, the schema, and dedup at the write. */
function wouldAnswer(
  source: SourceRecord | undefined,
  sandboxAllowed: boolean,
  recording: Recording,
  parsed: boolean,
  schema: TransportReplayReport['schema'],
  duplicate: boolean,
): TransportReplayReport['would_answer'] {
  if (source === undefined) return { status: 404, code: 'not_found' };
  if (recording.body_bytes > source.body_limit_bytes) return { status: 413, code: 'payload_too_large' };
  if (source.environment === 'sandbox' && !sandboxAllowed) return { status: 402, code: 'sandbox_disabled' };
  if (!parsed) return { status: 400, code: 'malformed_json' };
  if (schema.ok === false) return { status: 422, code: schema.code };
  if (duplicate) return { status: 409, code: 'duplicate_event' };
  return { status: 204, code: null };
}
