// How events and recordings lie in LMDB: an event's payload as its JSON text, so storing it costs a
// string copy instead of a msgpack walk of the object, and a recording's body only when it differs
// from that text (a webhook's body usually is the payload, byte for byte).

import type { Recording, StoredEvent } from './event-record.ts';
import { payloadTextOf, withLazyPayload } from './payload-text.ts';

/** An event as stored: everything but `payload`, which is kept as `payload_json`. */
export type EventRecord = Omit<StoredEvent, 'payload'> & { readonly payload_json: string };

/** A recording as stored: `body` is left out when it equals the event's `payload_json`. */
export type RecordingRecord = Omit<Recording, 'body'> & { readonly body?: string; readonly body_is_payload?: true };

/**
 * `payloadJson` must be the JSON text of `event.payload` when given (webhooks pass the body they
 * parsed); otherwise the event's remembered text (payload-text.ts), or its payload serialized.
 */
export function toEventRecord(event: StoredEvent, payloadJson: string | undefined): EventRecord {
  // Copied field by field, so `payload` is never read: it may be parsed only when read (withLazyPayload).
  const record: Record<string, unknown> = {};
  for (const key of Object.keys(event)) if (key !== 'payload') record[key] = event[key as keyof StoredEvent];
  record['payload_json'] = payloadJson ?? payloadTextOf(event);
  return record as EventRecord;
}

/**
 * The record in today's layout, its payload left as text: one written before that layout (it holds
 * the payload itself) gets the text `payloadTextOf` gives for it, the payload serialized.
 */
export function currentEventRecord(record: EventRecord): EventRecord {
  if (typeof record.payload_json === 'string') return withCurrentFields(record);
  const { payload, ...rest } = record as unknown as StoredEvent;
  return withCurrentFields({ ...rest, payload_json: JSON.stringify(payload ?? null) });
}

/**
 * The event with its payload parsed when something first reads it: answers hand the payload on as
 * its text (eventWithRawPayload), and a page of megabyte payloads parsed on the event loop only to
 * be thrown away held every tenant's requests for seconds.
 */
export function fromEventRecord(record: EventRecord): StoredEvent {
  // Data dirs from before this layout hold the payload itself.
  if (typeof record.payload_json !== 'string') return withCurrentFields(record as unknown as StoredEvent);
  const { payload_json: payloadJson, ...rest } = withCurrentFields(record);
  return withLazyPayload({ ...rest, payload: undefined }, payloadJson);
}

/** Fields added since a record was written read as their default: `replay_workflow_ids` null (every listener). */
export function withCurrentFields<T extends { readonly replay_workflow_ids: readonly string[] | null }>(record: T): T {
  return record.replay_workflow_ids === undefined ? { ...record, replay_workflow_ids: null } : record;
}

export function toRecordingRecord(recording: Recording, payloadJson: string): RecordingRecord {
  if (recording.body_truncated || recording.body !== payloadJson) return recording;
  const { body: _sameAsPayload, ...rest } = recording;
  return { ...rest, body_is_payload: true };
}

export function fromRecordingRecord(record: RecordingRecord, event: EventRecord | undefined): Recording {
  const { body_is_payload: bodyIsPayload, body, ...rest } = record;
  return { ...rest, body: bodyIsPayload === true ? (event?.payload_json ?? '') : (body ?? '') };
}
