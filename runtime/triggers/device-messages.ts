// A device socket's message frames: each is checked against the socket's and the org's caps,
// parsed, and stored as an event (from source `@device:<name>`, deduplicated by its id) once the
// connection's `device.connected` is durable; each gets one answer, an ack once the event is on
// disk or a nack saying why not (device-frame.ts has the wire format).

import type { WebSocket } from 'uWebSockets.js';
import type { Clock } from '../clock.ts';
import { ConflictError, InputError, RetryableError, SluiceError, notFound } from '../errors.ts';
import { generateEventId, rootEvent } from '../events/event-record.ts';
import type { EventStore } from '../events/event-store.ts';
import type { EventWriteTurn, EventWriteTurns } from '../events/event-write-turns.ts';
import type { IngestQuota } from '../ingest/ingest-quota.ts';
import { logFailure } from '../ledger/commit-failure-guard.ts';
import type { Logger } from '../log.ts';
import type { SchemaChecks } from '../sources/schema-checks.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { TokenBucket } from '../token-bucket.ts';
import { ackFrame, CLOSE_SANDBOX_RESET, CLOSE_TOO_MANY_REFUSED, frameIdOf, leadingFrameId, MAX_MESSAGES_IN_FLIGHT, nackFrame, parseDeviceMessage, type DeviceMessage } from './device-frame.ts';
import { deviceSchemas, deviceSource } from './device-record.ts';
import { closeSocket, sendFrame, type SocketData } from './device-socket.ts';
import type { DeviceStore } from './device-store.ts';
import { QuotaExceededError } from '../ingest/ingest-quota.ts';
import { RetryStagger } from '../ingest/retry-stagger.ts';
import type { ConnectPauses } from './connect-pauses.ts';

/** Bytes of message frames one org's sockets hold while they are stored; past it a retryable `server_busy` nack. */
const MAX_ORG_BYTES_IN_FLIGHT = 16 * 1024 * 1024;

/**
 * Frames one org's sockets may have refused as no message (malformed, too large, not a message's
 * shape) per second, and in a burst: each costs a parse and an answer on the event loop, and one
 * socket sending malformed frames as fast as it could held every org's requests for seconds. A
 * socket whose refused frame finds the budget spent is closed (1008, `too_many_refused`).
 * Back-pressure answers (too_many_in_flight, server_busy) name the frame's id: read from its first
 * bytes when it opens with it (as the client kit writes frames), they do not count, so a burst of
 * such messages is not closed for it; any other frame's id takes a parse (~0.5 ms for 64 KiB), and
 * its busy answer counts as a refusal: a client flooding such frames past a cap is closed instead
 * of holding every org's event loop.
 */
export const REFUSALS_PER_SECOND = 1000;
const REFUSAL_BURST = 2000;

/**
 * The reading time one refusal stands for: a refused frame takes one refusal per REFUSAL_MS its
 * parse took (one at least), so the budget bounds the event loop's time too, ~50 ms a second per
 * org. Counted by frames alone, 200 frames a second of 64 KiB holding ~7,500 members (~7 ms each
 * to parse, check and read its id) held every org's requests ~180 ms, within the count.
 */
export const REFUSAL_MS = 0.05;
/** The most one refused frame counts for (10 ms of reading): a tenth of the burst. */
const MAX_REFUSALS_A_FRAME = REFUSAL_BURST / 10;

/**
 * Quota refusals a socket may get before the moment its nack named (retry-stagger.ts): its messages
 * in flight when the first nack came, twice over. A socket past it sends again without waiting
 * (each refused, its moment still ahead, at the cost of a parse and a nack), and is closed (1008,
 * `retry_after_ignored`), its device's connects paused (connect-pauses.ts); the client kit and
 * `sluice device` wait.
 */
export const MAX_EARLY_QUOTA_REFUSALS = 2 * MAX_MESSAGES_IN_FLIGHT;

const closingError = (): RetryableError => new RetryableError('connection_closing', 'This connection is being closed; send the message again on the next one.');

export interface DeviceMessageDeps {
  readonly devices: DeviceStore;
  readonly events: EventStore;
  readonly orgs: OrganizationStore;
  readonly quota: IngestQuota;
  /** A message, connection or deletion event is stored in its turn: after any sandbox reset of its org, within the budget of runs built (event-write-turns.ts). */
  readonly writeTurns: EventWriteTurns;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Counts each message stored (sluice_ingest_total{outcome="accepted_device"}). */
  readonly onStored: () => void;
  /** Messages are checked against the device's schemas here, off the event loop (schema-checks.ts). */
  readonly schemaChecks: SchemaChecks;
  /** Milliseconds, for what a refused frame's reading cost (REFUSAL_MS); default performance.now (tests give theirs). */
  readonly readingClock?: () => number;
}

export class DeviceMessages {
  readonly #d: DeviceMessageDeps;
  /** Bytes of message frames each org's sockets are storing. */
  readonly #orgBytes = new Map<string, number>();
  /** Each org's budget of refused messages (REFUSALS_PER_SECOND). */
  readonly #refusals = new Map<string, TokenBucket>();
  /** The moments told to the org's sockets its quota refused. */
  readonly #stagger = new RetryStagger();
  /** Where a device whose socket did not wait out its nacks is paused (DeviceSockets checks it at connects). */
  readonly #pauses: ConnectPauses;

  constructor(deps: DeviceMessageDeps, pauses: ConnectPauses) {
    this.#d = deps;
    this.#pauses = pauses;
  }

  /** Checks a frame against the caps and parses it, then stores it (or answers a nack at once). */
  onMessage(ws: WebSocket<SocketData>, frame: Buffer, isBinary: boolean): void {
    const data = ws.getUserData();
    const orgId = data.device.org_id;
    // Back-pressure: answered before the message is checked (a frame that is no message is told so
    // once it is sent again: its nack is retryable meanwhile); held against the socket only when its
    // id takes a parse (REFUSALS_PER_SECOND).
    const busy =
      data.inFlight.size >= MAX_MESSAGES_IN_FLIGHT
        ? new SluiceError(429, 'too_many_in_flight', `At most ${MAX_MESSAGES_IN_FLIGHT} messages of a socket are stored at once; wait for their acks.`)
        : (this.#orgBytes.get(orgId) ?? 0) + frame.length > MAX_ORG_BYTES_IN_FLIGHT
          ? new RetryableError('server_busy', "This organization's devices have many messages being stored; send it again shortly.", 1000)
          : undefined;
    const readingStarted = this.#readingNow();
    if (busy !== undefined) {
      const id = leadingFrameId(frame, isBinary);
      if (id === undefined) this.#refuseParsed(ws, frame, isBinary, busy, readingStarted);
      else sendFrame(data, ws, nackFrame(id, busy));
      return;
    }
    let message: DeviceMessage;
    try {
      message = parseDeviceMessage(frame, isBinary);
    } catch (error) {
      // A frame that is no message (malformed, too large, not JSON's shape): it cost a parse.
      this.#refuseParsed(ws, frame, isBinary, error, readingStarted);
      return;
    }
    this.#orgBytes.set(orgId, (this.#orgBytes.get(orgId) ?? 0) + frame.length);
    const storing = this.#store(ws, data, message).finally(() => {
      data.inFlight.delete(storing);
      const left = (this.#orgBytes.get(orgId) ?? 0) - frame.length;
      if (left > 0) this.#orgBytes.set(orgId, left);
      else this.#orgBytes.delete(orgId);
    });
    data.inFlight.add(storing);
  }

  /** Lets go of the org's refusal budget and byte count once its removal is finished. */
  forgetOrg(orgId: string): void {
    this.#refusals.delete(orgId);
    this.#orgBytes.delete(orgId);
    this.#stagger.forget(orgId);
  }

  /**
   * Nacks a frame whose reading costs a parse (its id is read whole) with `error`, out of the org's
   * refusal budget; once that is spent the socket is closed instead (1008, `too_many_refused`).
   */
  #refuseParsed(ws: WebSocket<SocketData>, frame: Buffer, isBinary: boolean, error: unknown, readingStarted: number): void {
    const now = this.#d.clock.now();
    const budget = this.#refusalBudget(ws.getUserData().device.org_id, now);
    // Spent: closed before its id is read (that is a parse more).
    if (budget.waitFor(now) > 0) {
      closeSocket(ws, { reason: 'too_many_refused', code: CLOSE_TOO_MANY_REFUSED }, `more than ${REFUSALS_PER_SECOND} refused messages a second (a frame counts once per ${REFUSAL_MS} ms its reading took); fix what the nacks say`);
      return;
    }
    const id = frameIdOf(frame, isBinary);
    // What its reading took, paid even past what is left (the next refused frame finds it spent). At
    // most MAX_REFUSALS_A_FRAME: a pause of the whole process (a GC) while one frame was read is not the frame's.
    const refusals = Math.min(MAX_REFUSALS_A_FRAME, Math.max(1, Math.ceil((this.#readingNow() - readingStarted) / REFUSAL_MS)));
    budget.takeOnCredit(now, refusals, MAX_REFUSALS_A_FRAME);
    sendFrame(ws.getUserData(), ws, nackFrame(id, error));
  }

  /** The org's budget of refusals (REFUSALS_PER_SECOND). */
  #refusalBudget(orgId: string, now: number): TokenBucket {
    let bucket = this.#refusals.get(orgId);
    if (bucket === undefined) this.#refusals.set(orgId, (bucket = new TokenBucket(REFUSAL_BURST, REFUSALS_PER_SECOND, now)));
    return bucket;
  }

  #readingNow(): number {
    return this.#d.readingClock?.() ?? performance.now();
  }

  /** Stores the message as an event once the connection is recorded (so it follows `device.connected`), then answers. */
  async #store(ws: WebSocket<SocketData>, data: SocketData, message: DeviceMessage): Promise<void> {
    if (!(await data.ready)) return;
    const { device } = data;
    // When the store was tried: a quota refusal's moment is judged at it. Judged after the await
    // that answers a duplicate, a hold whose moment passed meanwhile got a new one behind every other socket's.
    let triedAt: number | undefined;
    let turn: EventWriteTurn | undefined;
    try {
      // Checked first, against the device's schemas as they are when its check is asked for (a PATCH
      // applies to the next message, on open sockets too): the check may wait for the checking
      // thread, and nothing below may wait before the store. `ordered`: the org's messages are
      // stored in the order they came.
      const declared = this.#d.devices.get(device.org_id, device.name);
      const checking = declared === undefined ? undefined : this.#d.schemaChecks.check(deviceSchemas(declared), message.type, message.payloadJson, true);
      // A message stored before the device's schemas changed, sent again (its ack was lost), is
      // acked as the duplicate it is: a nack would say it was never stored.
      if (checking !== undefined) await this.#d.events.unlessStored(checking, device.org_id, { source: deviceSource(device.name), providerEventId: message.id }, this.#d.clock.now());
      // Stored in its turn (after any sandbox reset, within the budget of runs built), with no await
      // between the turn and the store (storeEvent starts it at once): see event-write-turns.ts.
      turn = await this.#d.writeTurns.take(device.org_id, device.environment, message.type);
      // Checked with no await before the store: a change that ends this connection waits for it.
      if (!data.accepting) throw closingError();
      const org = this.#d.orgs.get(device.org_id);
      if (org === undefined) throw notFound('Organization');
      // The plan may have lost its sandbox before this socket's close (queued behind the device's
      // connection changes) came: refused (402), as a new connection would be.
      assertSandboxAllowed(org, device.environment);
      const current = this.#d.devices.head(device.org_id, device.name);
      // Gone: it is being deleted. Not holding this connection open: a sandbox reset ended it, and
      // its socket is being closed (closeConnectionsEndedByReset) or must be (that close never came).
      if (current === undefined || current.id !== device.id) throw closingError();
      if (current.connection?.id !== data.connection.id) {
        sendFrame(data, ws, nackFrame(message.id, closingError()));
        closeSocket(ws, { reason: 'sandbox_reset', code: CLOSE_SANDBOX_RESET }, 'this connection is no longer recorded; connect again');
        return;
      }
      const nowMs = (triedAt = this.#d.clock.now());
      const id = generateEventId(nowMs);
      const fields = { id, org_id: device.org_id, type: message.type, payload: message.payload, environment: device.environment, source: deviceSource(device.name) };
      const event = rootEvent({ ...fields, provider_event_id: message.id, received_at_ms: nowMs });
      const claim = { source: event.source, providerEventId: message.id };
      // Held to the moment a quota nack told this socket, if still ahead: a token back before it is
      // for the sockets whose moment has come, not for one that sends again at once (retry-stagger.ts).
      const heldMs = this.#stagger.waitLeft(data, nowMs);
      await this.#d.quota.storeEvent(org, this.#d.events, { event, payloadJson: message.payloadJson, recording: null, claim }, heldMs);
      this.#d.onStored();
      sendFrame(data, ws, ackFrame(message.id, id, false));
    } catch (error) {
      if (error instanceof ConflictError && error.code === 'duplicate_event') {
        sendFrame(data, ws, ackFrame(message.id, String(error.details['original_event_id']), true));
        return;
      }
      if (!(error instanceof InputError || error instanceof SluiceError)) {
        logFailure(this.#d.logger, 'device message could not be stored', { org_id: device.org_id, device: device.name }, error);
      }
      if (!(error instanceof QuotaExceededError)) {
        sendFrame(data, ws, nackFrame(message.id, error));
        return;
      }
      // A quota refusal names a moment of this socket's own, apart from the org's other sockets' (retry-stagger.ts).
      const hint = this.#stagger.hint(device.org_id, data, triedAt ?? this.#d.clock.now(), error.retryAfterMs, error.slotMs);
      sendFrame(data, ws, nackFrame(message.id, error.waiting(hint.waitMs)));
      // More refused before its moment than it can have had in flight when told: it sends again without waiting.
      if (hint.early > MAX_EARLY_QUOTA_REFUSALS) {
        this.#pauses.pause(device, this.#d.clock.now(), hint.waitMs);
        closeSocket(ws, { reason: 'retry_after_ignored', code: CLOSE_TOO_MANY_REFUSED }, `messages sent again before the retry_after_ms their nacks named (${hint.early} refused in that wait); wait it out`);
      }
    } finally {
      turn?.release();
    }
  }
}
