// Transport replay (DESIGN 5): feeds a recorded request back through parsing and routing to explain
// what ingest would do with it today. It creates nothing; the signature is not re-checked because
// recordings never keep signatures (they are redacted).

import { InputError } from '../errors.ts';
import type { Inbox } from '../inbox/inbox.ts';
import type { Recording, StoredEvent } from '../events/event-record.ts';
import { parseJsonBytes } from '../http/parse-json.ts';
import { validateEventPayload } from '../sources/event-schemas.ts';
import type { SourceRecord } from '../sources/source-record.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';

export interface TransportReplayReport {
  readonly event_id: string;
  readonly source: string;
  readonly parsed: boolean;
  readonly type: string | null;
  readonly schema: { readonly ok: true } | { readonly ok: false; readonly field: string | null; readonly message: string };
  readonly dedup: { readonly provider_event_id: string | null; readonly duplicate_of: string | null };
  readonly would_trigger: ReadonlyArray<{ readonly workflow_id: string; readonly version: number; readonly name: string }>;
  readonly signature: 'not_rechecked_recordings_hold_no_signatures';
}

export interface TransportReplayDeps {
  readonly source: SourceRecord | undefined;
  readonly inbox: Inbox;
  readonly matching: (type: string) => readonly WorkflowVersion[];
  readonly nowMs: number;
}

export function explainTransportReplay(event: StoredEvent, recording: Recording | undefined, deps: TransportReplayDeps): TransportReplayReport {
  if (recording === undefined) {
    throw new InputError(409, 'no_recording', 'This event has no recorded request (it was not received as a webhook); nothing to replay.');
  }
  let payload: unknown;
  let parsed = true;
  try {
    payload = recording.body_truncated ? undefined : parseJsonBytes(Buffer.from(recording.body, 'utf8'));
  } catch {
    parsed = false;
  }
  if (recording.body_truncated) parsed = false;
  let schema: TransportReplayReport['schema'] = { ok: true };
  if (parsed && deps.source !== undefined) {
    try {
      validateEventPayload(deps.source, event.type, payload);
    } catch (error) {
      const failure = error as InputError;
      schema = { ok: false, field: failure.field ?? null, message: failure.message };
    }
  }
  const claim = event.provider_event_id === null ? undefined : deps.inbox.liveClaim(event.org_id, event.source, event.provider_event_id, deps.nowMs);
  return {
    event_id: event.id,
    source: event.source,
    parsed,
    type: parsed ? event.type : null,
    schema,
    dedup: { provider_event_id: event.provider_event_id, duplicate_of: claim?.event_id ?? null },
    would_trigger: deps.matching(event.type).map((v) => ({ workflow_id: v.workflow_id, version: v.version, name: v.definition.name })),
    signature: 'not_rechecked_recordings_hold_no_signatures',
  };
}
