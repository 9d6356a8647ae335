// A device: something that keeps a WebSocket open to Sluice (a sensor, a point-of-sale terminal, a
// kiosk) and sends events over it. Its socket changing state is an event too: `device.connected`
// when a connection opens, `device.disconnected` when it ends, each sent once per connection.

import { createHash } from 'node:crypto';
import { InputError } from '../errors.ts';
import { rootEvent, type StoredEvent } from '../events/event-record.ts';
import { withPayloadText } from '../events/payload-text.ts';
import type { SchemaDeclarer } from '../sources/event-schemas.ts';
import { withSchemasParsed, withSchemaText, withoutSchemas, type WithStoredSchemas } from '../sources/stored-schemas.ts';
import type { Environment } from '../sources/source-record.ts';

/** An org's devices are few enough to list in one answer and scan at boot. */
export const MAX_DEVICES_PER_ORG = 1000;
export const CONNECTED_EVENT_TYPE = 'device.connected';
export const DISCONNECTED_EVENT_TYPE = 'device.disconnected';
/**
 * The event types only Sluice writes for a device: no device message, API event, schedule or
 * action output may claim them, so a workflow on device.disconnected can trust the device is gone.
 */
export const CONNECTION_EVENT_TYPES: ReadonlySet<string> = new Set([CONNECTED_EVENT_TYPE, DISCONNECTED_EVENT_TYPE]);

/** Refuses (400 reserved_event_type, naming `field`) an event type only Sluice writes. */
export function assertNotReservedType(type: string, field: string): void {
  if (CONNECTION_EVENT_TYPES.has(type)) {
    throw new InputError(400, 'reserved_event_type', `"${type}" is written by Sluice when a device connection opens or ends; nothing else may send it.`, { field });
  }
}

/** Why a connection ended, as `device.disconnected` and the device's view say. */
export type DisconnectReason =
  /** The device closed it (a close frame). */
  | 'client_closed'
  /** The socket broke without a close frame, or missed its pings. */
  | 'connection_lost'
  /** The device opened a newer connection. */
  | 'replaced'
  /** The device's token was rotated: it must reconnect with the new one. */
  | 'token_rotated'
  /** The device was deleted. */
  | 'device_deleted'
  /** Its sandbox became unavailable (the org moved to a plan without one). */
  | 'sandbox_disabled'
  /**
   * The org's sandbox was reset while it was open: its `device.connected` went with the sandbox's
   * events, so no `device.disconnected` is written (only the device's view says so).
   */
  | 'sandbox_reset'
  /** It kept sending messages Sluice refused faster than the org's refusal budget allows (device-messages.ts). */
  | 'too_many_refused'
  /** It kept sending messages its org's quota refused before the wait their nacks named (device-messages.ts). */
  | 'retry_after_ignored'
  /** The runtime shut down cleanly. */
  | 'runtime_stopped'
  /** The runtime stopped without closing it (a crash): found open at the next start. */
  | 'runtime_restarted';

export interface DeviceConnection {
  readonly id: string;
  readonly connected_at_ms: number;
}

export interface DeviceRecord {
  /** Random, given at creation: a device deleted and made again under its name starts afresh. */
  readonly id: string;
  readonly org_id: string;
  readonly name: string;
  readonly environment: Environment;
  /** SHA-256 of the device's token; the token itself is shown once, at creation or rotation. */
  readonly token_hash: string;
  /** The first characters of the token, so a person can tell tokens apart. */
  readonly token_prefix: string;
  /** Declared event types and their JSON Schemas, as a source's: a message of such a type must pass. */
  readonly event_types: Readonly<Record<string, object>>;
  readonly created_at: string;
  readonly updated_at: string;
  /** The connection the ledger knows to be open (its `device.connected` is stored), or null. */
  readonly connection: DeviceConnection | null;
  readonly last_disconnected_at: string | null;
  readonly last_disconnect_reason: DisconnectReason | null;
}

/**
 * A device without its schemas: what a socket's upgrade checks (the token) and keeps for the
 * connection's life. Cached apart from whole records (device-store.ts): a wrong token never decodes
 * the ~1 MiB of schemas a device may declare, and a socket never holds its own decoded copy of them.
 */
export type DeviceHead = Omit<DeviceRecord, 'event_types'>;

/** A device as the ledger holds it: its schemas as JSON text (sources/stored-schemas.ts; data format 7). */
export type StoredDevice = WithStoredSchemas<DeviceHead>;

/** The record to store for `device`. */
export const storedDevice = (device: DeviceRecord): StoredDevice => withSchemaText<DeviceHead>(device);

/** The device a stored record holds, its schemas parsed. */
export const deviceFromStored = (stored: StoredDevice): DeviceRecord => withSchemasParsed(stored);

/** The device a stored record holds, without its schemas. */
export const headOfStored = (stored: StoredDevice): DeviceHead => withoutSchemas(stored);

/** The source recorded on a device's events; its messages' ids are deduplicated under it. */
export const deviceSource = (name: string): string => `@device:${name}`;

/** A device registered before devices declared schemas has none stored: it declares none. */
const eventTypesOf = (device: DeviceRecord): Readonly<Record<string, object>> => device.event_types ?? {};

/** The device as the event schemas see it (its validators are cached under its event source). */
export const deviceSchemas = (device: DeviceRecord): SchemaDeclarer => ({ org_id: device.org_id, name: deviceSource(device.name), event_types: eventTypesOf(device), updated_at: device.updated_at });

/** The socket path a device connects to (beside /hooks/:org/:source, outside the API-key paths). */
const devicePath = (orgId: string, name: string): string => `/devices/${orgId}/${name}`;

const iso = (ms: number): string => new Date(ms).toISOString();

/** The API view: no token hash; the connection's state as the ledger has it. */
export function describeDevice(device: DeviceRecord): Record<string, unknown> {
  return {
    name: device.name,
    environment: device.environment,
    token_prefix: device.token_prefix,
    socket_path: devicePath(device.org_id, device.name),
    event_types: eventTypesOf(device),
    state: device.connection === null ? 'disconnected' : 'connected',
    connection_id: device.connection?.id ?? null,
    connected_at: device.connection === null ? null : iso(device.connection.connected_at_ms),
    last_disconnected_at: device.last_disconnected_at,
    last_disconnect_reason: device.last_disconnect_reason,
    created_at: device.created_at,
    updated_at: device.updated_at,
  };
}

/** The deterministic id of a connection's state event: written again after a crash, it is recognised. */
const stateEventId = (device: DeviceHead, connectionId: string, type: string): string =>
  `evt_dev_${createHash('sha256').update(`${device.id}\u0000${connectionId}\u0000${type}`).digest('hex').slice(0, 32)}`;

function stateEvent(device: DeviceHead, type: string, connectionId: string, payload: Record<string, unknown>, nowMs: number): StoredEvent {
  const id = stateEventId(device, connectionId, type);
  const text = JSON.stringify({ device: device.name, connection_id: connectionId, ...payload });
  const fields = { id, org_id: device.org_id, type, payload: JSON.parse(text) as unknown, environment: device.environment, source: deviceSource(device.name) };
  return withPayloadText(rootEvent({ ...fields, provider_event_id: null, received_at_ms: nowMs }), text);
}

/** The id of the connection's `device.connected` (the device's `ready` frame names it). */
export const connectedEventId = (device: DeviceHead, connection: DeviceConnection): string => stateEventId(device, connection.id, CONNECTED_EVENT_TYPE);

export const connectedEvent = (device: DeviceHead, connection: DeviceConnection): StoredEvent =>
  stateEvent(device, CONNECTED_EVENT_TYPE, connection.id, { connected_at: iso(connection.connected_at_ms) }, connection.connected_at_ms);

export const disconnectedEvent = (device: DeviceHead, connection: DeviceConnection, reason: DisconnectReason, code: number | null, nowMs: number): StoredEvent =>
  stateEvent(device, DISCONNECTED_EVENT_TYPE, connection.id, { connected_at: iso(connection.connected_at_ms), disconnected_at: iso(nowMs), reason, close_code: code }, nowMs);
