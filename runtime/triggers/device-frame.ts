// The device socket's wire format: JSON text frames, small enough to write by hand on a
// microcontroller. A device sends `{"id","type","payload"}`; Sluice answers each with an `ack` once
// its event is durable, or a `nack` saying why not and whether sending it again can help. Also the
// caps a device must keep to and the close codes it must handle (README, "Devices").

import { InputError, retryAfterMsOf, SluiceError } from '../errors.ts';
import { failedWriteError } from '../ledger/commit-failure-guard.ts';
import { decodeJsonBytes, refuseLoneSurrogates } from '../http/parse-json.ts';
import { isDeliveryId } from '../ingest/verification.ts';
import { EVENT_TYPE_PATTERN } from '../sources/source-record.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import { memberText } from '../validation/json-member-text.ts';
import { nestsDeeperThan } from '../validation/json-nesting.ts';
import { assertNotReservedType } from './device-record.ts';

/** A message frame's bytes (its payload is most of it); a larger one gets a `frame_too_large` nack. */
export const MAX_DEVICE_MESSAGE_BYTES = 64 * 1024;

/** Messages of one socket stored at once; past it a message gets a retryable `too_many_in_flight` nack. */
export const MAX_MESSAGES_IN_FLIGHT = 64;

/** Close codes: Sluice stops (1001); the connection could not be recorded or a change not confirmed (1011). */
export const CLOSE_RUNTIME_STOPPING = 1001;
export const CLOSE_NOT_RECORDED = 1011;
/** The device's token was rotated; its sandbox is gone (plan); it was deleted; a newer connection replaced this one. */
export const CLOSE_TOKEN_ROTATED = 4401;
export const CLOSE_SANDBOX_DISABLED = 4402;
export const CLOSE_DEVICE_DELETED = 4404;
export const CLOSE_REPLACED = 4409;
/** The org's sandbox was reset, which ended this connection: connect again (into the new sandbox). */
export const CLOSE_SANDBOX_RESET = 4410;
/** The socket sent refused messages past its org's refusal budget (a policy violation). */
export const CLOSE_TOO_MANY_REFUSED = 1008;

/** One message a device sent: its id is the dedup key (per device), as a webhook's id is per source. */
export interface DeviceMessage {
  readonly id: string;
  readonly type: string;
  readonly payload: Record<string, unknown>;
  /** The payload's JSON text as the device wrote it. */
  readonly payloadJson: string;
}

const parseShape = createBodyParser<{ id: string; type: string; payload?: Record<string, unknown> }>(
  {
    type: 'object',
    additionalProperties: false,
    required: ['id', 'type'],
    properties: {
      id: { type: 'string', minLength: 1, maxLength: 256 },
      type: { type: 'string', pattern: EVENT_TYPE_PATTERN },
      payload: { type: 'object' },
    },
  },
  'invalid_message',
  'The frame',
);

/**
 * The message a frame carries, or an InputError naming what is wrong (the frame's `id`, when it
 * could be read, rides along so the nack can name the message).
 */
export function parseDeviceMessage(frame: Buffer, isBinary: boolean): DeviceMessage {
  if (isBinary) throw new InputError(400, 'unsupported_frame', 'Device messages are JSON text frames; binary frames are not read.');
  if (frame.length > MAX_DEVICE_MESSAGE_BYTES) {
    throw new InputError(413, 'frame_too_large', `A device message is at most ${MAX_DEVICE_MESSAGE_BYTES} bytes.`);
  }
  const { value, text } = decodeJsonBytes(frame, 'The frame');
  const message = parseShape(refuseLoneSurrogates(value, text, 'The frame'));
  if (!isDeliveryId(message.id)) throw new InputError(400, 'invalid_message', 'Field "id" must be 1-256 printable ASCII characters without spaces.', { field: 'id' });
  // A workflow on device.disconnected must be able to trust that the device is really gone.
  assertNotReservedType(message.type, 'type');
  const payloadJson = message.payload === undefined ? '{}' : (memberText(text, 'payload') ?? JSON.stringify(message.payload));
  return { id: message.id, type: message.type, payload: message.payload ?? {}, payloadJson };
}

/** The longest opening a frame's leading id is looked for in: `{"id":"` and 256 characters, with some space. */
const LEADING_ID_BYTES = 300;
const LEADING_ID = /^\s*\{\s*"id"\s*:\s*"([^"\\]*)"/;

/**
 * The id of a frame whose first member is a plain string `id` (`{"id":"…",…}`, as the client kit
 * writes it), read from its first bytes alone; undefined when the frame does not open so (its id
 * then takes a parse, frameIdOf). Null for a binary frame, or an id no message may have.
 */
export function leadingFrameId(frame: Buffer, isBinary: boolean): string | null | undefined {
  if (isBinary) return null;
  const id = LEADING_ID.exec(frame.toString('utf8', 0, LEADING_ID_BYTES))?.[1];
  if (id === undefined) return undefined;
  return isDeliveryId(id) ? id : null;
}

/**
 * The id a frame names, if it is a JSON object with a usable string `id` (for the nack of a bad
 * frame), a frame over the message cap included: the socket's own cap (twice as large) bounds the parse.
 */
export function frameIdOf(frame: Buffer, isBinary: boolean): string | null {
  if (isBinary) return null;
  try {
    const text = frame.toString('utf8');
    // Nested past the cap, the frame was refused for it: parsing it whole cost ~5x a flat one of its
    // size, so only its top-level `id` is cut out and read.
    let id: unknown;
    if (nestsDeeperThan(text)) {
      const member = memberText(text, 'id');
      id = member === undefined ? undefined : JSON.parse(member);
    } else {
      id = (JSON.parse(text) as { id?: unknown } | null)?.id;
    }
    return typeof id === 'string' && isDeliveryId(id) ? id : null;
  } catch {
    return null;
  }
}

export const readyFrame = (device: string, connectionId: string, eventId: string): string =>
  JSON.stringify({ type: 'ready', device, connection_id: connectionId, event_id: eventId });

/** The message's event is durable (or was stored before: `duplicate`, naming the original). */
export const ackFrame = (id: string, eventId: string, duplicate: boolean): string => JSON.stringify({ type: 'ack', id, event_id: eventId, duplicate });

/**
 * The message was not stored. `retryable`: the same frame may succeed later (quota, too many in
 * flight, a failed write: `write_failed`, as HTTP answers it), after `retry_after_ms` when given;
 * otherwise it never will.
 */
export function nackFrame(id: string | null, error: unknown): string {
  const known = error instanceof SluiceError ? error : (failedWriteError('message', error) ?? new SluiceError(500, 'internal_error', 'The message could not be stored; send it again.'));
  const retryable = known.status === 429 || known.status >= 500;
  // A quota, a full run queue, a failed write: whatever says when to try again.
  const hint = retryAfterMsOf(known);
  const retryAfter = hint === undefined ? {} : { retry_after_ms: hint };
  return JSON.stringify({ type: 'nack', id, ...known.toBody(), retryable, ...retryAfter });
}
