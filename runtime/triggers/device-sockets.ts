// The device WebSocket at /devices/:org_id/:device: a device authenticates with its own token, its
// connection opening and ending become `device.connected` / `device.disconnected` events, and each
// message frame becomes an event, acknowledged once durable (device-frame.ts has the wire format).

import { STATUS_CODES } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import { constantTimeEqual, hashToken } from '../auth/secrets.ts';
import type { Clock } from '../clock.ts';
import { AccessError, ConflictError, InputError, RetryableError, SluiceError, notFound } from '../errors.ts';
import { generateEventId, type StoredEvent } from '../events/event-record.ts';
import type { EventStore } from '../events/event-store.ts';
import type { SandboxGenerations } from '../events/sandbox-generation.ts';
import type { Route } from '../http/types.ts';
import type { IngestQuota } from '../ingest/ingest-quota.ts';
import type { Logger } from '../log.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import { assertSandboxAllowed, sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { ackFrame, frameIdOf, MAX_DEVICE_MESSAGE_BYTES, nackFrame, parseDeviceMessage, readyFrame, type DeviceMessage } from './device-frame.ts';
import { connectedEventId, deviceSource, type DeviceConnection, type DeviceRecord, type DisconnectReason } from './device-record.ts';
import type { DeviceStore, Ending } from './device-store.ts';

/** The WebSocket subprotocol of device sockets; the device token may ride as a second entry beside it. */
export const DEVICE_PROTOCOL = 'sluice-device';
/** Close codes a device must handle (README, "Devices"). */
export const CLOSE_RUNTIME_STOPPING = 1001;
export const CLOSE_NOT_RECORDED = 1011;
export const CLOSE_TOKEN_ROTATED = 4401;
export const CLOSE_SANDBOX_DISABLED = 4402;
export const CLOSE_DEVICE_DELETED = 4404;
export const CLOSE_REPLACED = 4409;
/** Messages of one socket stored at once; past it a message gets a retryable `too_many_in_flight` nack. */
export const MAX_MESSAGES_IN_FLIGHT = 64;
/** Answers queued to a device that does not read them; past it the socket is dropped (1006). */
const MAX_BACKPRESSURE = 64 * 1024;
/** Seconds without a frame or a pong before uWS drops the socket (it pings on its own before that). */
const IDLE_TIMEOUT_S = 120;

export interface DeviceSocketDeps {
  readonly devices: DeviceStore;
  readonly events: EventStore;
  readonly orgs: OrganizationStore;
  readonly quota: IngestQuota;
  readonly generations: SandboxGenerations;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Counts each message stored (sluice_ingest_total{outcome="accepted_device"}). */
  readonly onStored: () => void;
}

interface SocketData {
  /** The device as it was when its token was checked; the ledger refuses the connection if it changed since. */
  readonly device: DeviceRecord;
  readonly connection: DeviceConnection;
  /** Resolves true once `device.connected` is durable; false when it could not be recorded (the socket is closed). */
  ready: Promise<boolean>;
  readonly inFlight: Set<Promise<void>>;
  open: boolean;
  /** Set when Sluice closes the socket: why, for its `device.disconnected`. */
  ending: Ending | undefined;
}

const keyOf = (orgId: string, name: string): string => `${orgId}\u0000${name}`;

export class DeviceSockets {
  readonly #d: DeviceSocketDeps;
  /** The open socket of each device (one at a time: a newer one replaces it). */
  readonly #sockets = new Map<string, WebSocket<SocketData>>();
  /** Connection endings being written; close() waits for them before the ledger closes. */
  readonly #endings = new Set<Promise<void>>();
  #accepting = false;

  constructor(app: TemplatedApp, deps: DeviceSocketDeps) {
    this.#d = deps;
    app.ws<SocketData>('/devices/:org_id/:device', {
      maxPayloadLength: 2 * MAX_DEVICE_MESSAGE_BYTES,
      maxBackpressure: MAX_BACKPRESSURE,
      // (The uWS 20.30 typings declare this flag as a number.)
      closeOnBackpressureLimit: 1,
      idleTimeout: IDLE_TIMEOUT_S,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => {
        const orgId = req.getParameter(0) ?? '';
        const name = req.getParameter(1) ?? '';
        const offered = req.getHeader('sec-websocket-protocol').split(',').map((p) => p.trim()).filter((p) => p !== '');
        const token = new URLSearchParams(req.getQuery() ?? '').get('token') ?? offered.find((p) => p !== DEVICE_PROTOCOL);
        const key = req.getHeader('sec-websocket-key');
        const extensions = req.getHeader('sec-websocket-extensions');
        let device: DeviceRecord;
        try {
          device = this.#admit(orgId, name, token);
        } catch (error) {
          const refusal = error instanceof SluiceError ? error : new SluiceError(500, 'internal_error', 'The device could not be admitted.');
          res.writeStatus(`${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}`).writeHeader('content-type', 'application/json').end(JSON.stringify(refusal.toBody()));
          return;
        }
        const connection: DeviceConnection = { id: `con_${randomBytes(12).toString('hex')}`, connected_at_ms: deps.clock.now() };
        const data: SocketData = { device, connection, ready: Promise.resolve(false), inFlight: new Set(), open: true, ending: undefined };
        const protocol = offered.includes(DEVICE_PROTOCOL) ? DEVICE_PROTOCOL : (offered[0] ?? '');
        res.upgrade<SocketData>(data, key, protocol, extensions, context);
      },
      open: (ws) => {
        const data = ws.getUserData();
        const key = keyOf(data.device.org_id, data.device.name);
        const previous = this.#sockets.get(key);
        this.#sockets.set(key, ws);
        data.ready = this.#connect(ws, data, previous);
      },
      message: (ws, message, isBinary) => this.#onMessage(ws, Buffer.from(new Uint8Array(message)), isBinary),
      close: (ws, code) => {
        const data = ws.getUserData();
        data.open = false;
        const key = keyOf(data.device.org_id, data.device.name);
        if (this.#sockets.get(key) === ws) this.#sockets.delete(key);
        const ending: Ending = { reason: data.ending?.reason ?? (code === 1006 ? 'connection_lost' : 'client_closed'), code };
        const written = this.#end(data, ending).finally(() => this.#endings.delete(written));
        this.#endings.add(written);
      },
    });
  }

  /** Ends the connections the previous process left open, then lets devices connect; call after run recovery. */
  async start(): Promise<void> {
    const ended = await this.#d.devices.endConnectionsLeftOpen(this.#d.clock.now());
    if (ended > 0) this.#d.logger.info('device connections left open by the previous process ended', { count: ended });
    this.#accepting = true;
  }

  /** Closes the device's socket, if open, saying why (its `device.disconnected` carries the reason unless already written). */
  drop(orgId: string, name: string, reason: DisconnectReason, code: number): void {
    const ws = this.#sockets.get(keyOf(orgId, name));
    if (ws !== undefined) this.#close(ws, { reason, code }, code);
  }

  /** The org's plan lost its sandbox: its sandbox devices' sockets close with 4402. */
  dropSandboxSocketsIfDisallowed(orgId: string): void {
    const org = this.#d.orgs.get(orgId);
    if (org === undefined || sandboxAllowed(org)) return;
    for (const ws of this.#sockets.values()) {
      const { device } = ws.getUserData();
      if (device.org_id === orgId && device.environment === 'sandbox') this.#close(ws, { reason: 'sandbox_disabled', code: CLOSE_SANDBOX_DISABLED }, CLOSE_SANDBOX_DISABLED);
    }
  }

  /** Refuses new sockets, closes the open ones (1001) and resolves once their endings are durable. */
  async close(): Promise<void> {
    this.#accepting = false;
    for (const ws of [...this.#sockets.values()]) this.#close(ws, { reason: 'runtime_stopped', code: CLOSE_RUNTIME_STOPPING }, CLOSE_RUNTIME_STOPPING);
    while (this.#endings.size > 0) await Promise.allSettled([...this.#endings]);
  }

  /** The device a socket request may open, or the refusal: 503 while starting, 404, 401, 402. */
  #admit(orgId: string, name: string, token: string | undefined): DeviceRecord {
    if (!this.#accepting) throw new RetryableError('starting', 'Sluice is starting or stopping; connect again in a few seconds.', 2000);
    const org = this.#d.orgs.get(orgId);
    const device = org === undefined ? undefined : this.#d.devices.get(orgId, name);
    if (org === undefined || device === undefined) throw notFound('Organization or device');
    if (token === undefined || !constantTimeEqual(hashToken(token), device.token_hash)) {
      throw new AccessError(401, 'unauthorized', `The device's token is required and must be current: ?token=<token>, or a Sec-WebSocket-Protocol entry next to ${DEVICE_PROTOCOL}.`);
    }
    assertSandboxAllowed(org, device.environment);
    return device;
  }

  /** Records the connection (ending a previous one of the device), then greets the device; false if it could not be recorded. */
  async #connect(ws: WebSocket<SocketData>, data: SocketData, previous: WebSocket<SocketData> | undefined): Promise<boolean> {
    const { device, connection } = data;
    const previousId = previous?.getUserData().connection.id;
    let recorded: boolean;
    try {
      if (device.environment === 'sandbox') await this.#d.generations.quiet(device.org_id);
      recorded = await this.#d.devices.connect(device, connection, (open) => ({ reason: open.id === previousId ? 'replaced' : 'connection_lost', code: null }));
    } catch (error) {
      this.#d.logger.error('device connection could not be recorded', { org_id: device.org_id, device: device.name, error: String(error) });
      this.#close(ws, { reason: 'connection_lost', code: CLOSE_NOT_RECORDED }, CLOSE_NOT_RECORDED, 'could not record the connection; connect again');
      return false;
    }
    if (!recorded) {
      // Deleted, or its token rotated, between the upgrade and now.
      const gone = this.#d.devices.get(device.org_id, device.name)?.id !== device.id;
      this.#close(ws, { reason: gone ? 'device_deleted' : 'token_rotated', code: null }, gone ? CLOSE_DEVICE_DELETED : CLOSE_TOKEN_ROTATED);
      return false;
    }
    if (previous !== undefined) this.#close(previous, { reason: 'replaced', code: CLOSE_REPLACED }, CLOSE_REPLACED, 'replaced by a newer connection of this device');
    this.#send(data, ws, readyFrame(device.name, connection.id, connectedEventId(device, connection)));
    return true;
  }

  #onMessage(ws: WebSocket<SocketData>, frame: Buffer, isBinary: boolean): void {
    const data = ws.getUserData();
    let message: DeviceMessage;
    try {
      if (data.inFlight.size >= MAX_MESSAGES_IN_FLIGHT) {
        throw new SluiceError(429, 'too_many_in_flight', `At most ${MAX_MESSAGES_IN_FLIGHT} messages of a socket are stored at once; wait for their acks.`);
      }
      message = parseDeviceMessage(frame, isBinary);
    } catch (error) {
      this.#send(data, ws, nackFrame(frameIdOf(frame, isBinary), error));
      return;
    }
    const storing = this.#store(ws, data, message).finally(() => data.inFlight.delete(storing));
    data.inFlight.add(storing);
  }

  /** Stores the message as an event once the connection is recorded (so it follows `device.connected`), then answers. */
  async #store(ws: WebSocket<SocketData>, data: SocketData, message: DeviceMessage): Promise<void> {
    if (!(await data.ready)) return;
    const { device } = data;
    try {
      const org = this.#d.orgs.get(device.org_id);
      if (org === undefined) throw notFound('Organization');
      const nowMs = this.#d.clock.now();
      const id = generateEventId(nowMs);
      const event: StoredEvent = {
        id,
        org_id: device.org_id,
        type: message.type,
        payload: message.payload,
        environment: device.environment,
        source: deviceSource(device.name),
        provider_event_id: message.id,
        received_at: new Date(nowMs).toISOString(),
        received_at_ms: nowMs,
        correlation_id: id,
        causation_id: null,
        depth: 0,
        replay_skip_side_effects: false,
      };
      const claim = { source: event.source, providerEventId: message.id };
      // No await between this wait and the store (spend calls it at once): see sandbox-generation.ts.
      if (device.environment === 'sandbox') await this.#d.generations.quiet(device.org_id);
      await this.#d.quota.spend(org, () => this.#d.events.store({ event, payloadJson: message.payloadJson, recording: null, claim }));
      this.#d.onStored();
      this.#send(data, ws, ackFrame(message.id, id, false));
    } catch (error) {
      if (error instanceof ConflictError && error.code === 'duplicate_event') {
        this.#send(data, ws, ackFrame(message.id, String(error.details['original_event_id']), true));
        return;
      }
      if (!(error instanceof InputError || error instanceof SluiceError)) {
        this.#d.logger.error('device message could not be stored', { org_id: device.org_id, device: device.name, error: String(error) });
      }
      this.#send(data, ws, nackFrame(message.id, error));
    }
  }

  /** Writes the connection's ending once its messages are settled (each event before `device.disconnected`). */
  async #end(data: SocketData, ending: Ending): Promise<void> {
    if (!(await data.ready)) return;
    await Promise.allSettled([...data.inFlight]);
    try {
      await this.#d.devices.disconnect(data.device, data.connection, ending, this.#d.clock.now());
    } catch (error) {
      // The ledger still holds the connection open: the device's next connection, or the next
      // start, ends it (reason connection_lost or runtime_restarted).
      this.#d.logger.error('device disconnection could not be recorded', { org_id: data.device.org_id, device: data.device.name, error: String(error) });
    }
  }

  #send(data: SocketData, ws: WebSocket<SocketData>, frame: string): void {
    if (data.open) ws.send(frame, false);
  }

  #close(ws: WebSocket<SocketData>, ending: Ending, code: number, reason: string = ending.reason): void {
    const data = ws.getUserData();
    if (!data.open) return;
    data.ending = ending;
    ws.end(code, reason);
  }
}

/** A plain GET of a device socket path (no WebSocket upgrade) is told what the endpoint is. */
export const deviceUpgradeRequired: Route = {
  method: 'GET',
  pattern: '/devices/:org_id/:device',
  handler: () => {
    throw new InputError(426, 'upgrade_required', `This is a device WebSocket endpoint: open it with a WebSocket client (subprotocol ${DEVICE_PROTOCOL}) and the device's token.`);
  },
};
