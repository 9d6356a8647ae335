// The exact JSON text of each event's payload, as it was received, kept beside the parsed event
// object (a WeakMap, so it never shows in the event's own JSON and goes when the event does).
// API answers, webhook step bodies, custom action input and replays hand the payload on as this
// text (validation/raw-json.ts says why the parsed value is not enough).

import { RawJson } from '../validation/raw-json.ts';
import type { StoredEvent } from './event-record.ts';
import { textBytes } from '../ledger/page-by-time.ts';

const texts = new WeakMap<StoredEvent, string>();

/** Remembers `text` as the payload text of `event`; returns the event. */
export function withPayloadText(event: StoredEvent, text: string): StoredEvent {
  texts.set(event, text);
  return event;
}

/**
 * Makes `event.payload` the parse of `text`, done when something first reads it, and remembers
 * `text` as its payload text; returns the event. For webhook ingest, which reads the body in a
 * thread (read-webhook-body.ts) and needs no parsed payload on the event loop.
 */
export function withLazyPayload(event: StoredEvent, text: string): StoredEvent {
  let parsed: { value: unknown } | undefined;
  Object.defineProperty(event, 'payload', {
    enumerable: true,
    get: () => (parsed ??= { value: JSON.parse(text) as unknown }).value,
  });
  return withPayloadText(event, text);
}

/** The payload as received, or (for an event built without its text) as serialized now. */
export const payloadTextOf = (event: StoredEvent): string => texts.get(event) ?? JSON.stringify(event.payload ?? null);

/** An event's size in a list answer, for paging by bytes: its payload text's bytes and about 512 for the rest. */
export const weighEvent = (event: StoredEvent): number => textBytes(payloadTextOf(event)) + 512;

/**
 * The event's members but its payload, copied one by one: a payload not parsed yet
 * (withLazyPayload) stays unparsed, where a spread or a rest pattern would read it.
 */
export function membersBesidesPayload(event: StoredEvent): Omit<StoredEvent, 'payload'> {
  const members: Record<string, unknown> = {};
  for (const key of Object.keys(event)) if (key !== 'payload') members[key] = event[key as keyof StoredEvent];
  return members as Omit<StoredEvent, 'payload'>;
}

/** The event for an answer or a step body: its payload written as received (serialize with stringifyWithRaw). */
export function eventWithRawPayload(event: StoredEvent): Omit<StoredEvent, 'payload'> & { readonly payload: RawJson } {
  return { ...membersBesidesPayload(event), payload: new RawJson(payloadTextOf(event)) };
}
