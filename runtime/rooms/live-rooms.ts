// The live WebSocket rooms at /organizations/:org_id/live: authentication at upgrade (and closing on key
// revocation), Subscribe with replay from the retained log, uWS topic fan-out, heartbeats, slow consumers.

import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import type { Authorizer, Principal } from '../auth/authorize.ts';
import type { Clock } from '../clock.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import { sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { decodeClientMessage, encodeLiveMessage, type RunUpdate } from './live-codec.ts';
import { isInRoom, isRoomWithin, parseSubscribeFrame, parseSubscribeQuery, topicFor, type Room, type Subscription } from './live-subscription.ts';
import { SeqOrder } from './seq-order.ts';
import type { UpdateLog } from './update-log.ts';

/**
 * Close codes a live client must handle (see README, "Live rooms"). A slow consumer is closed with
 * 4008 when the heartbeat sees half the backpressure budget queued, or dropped by uWS (1006, no close
 * frame) the moment a message would exceed it; either way it reconnects with `after_seq`.
 */
export const CLOSE_PROTOCOL_ERROR = 1002;
export const CLOSE_SLOW_CONSUMER = 4008;
/** Sent to every socket opened with an API key when the key is revoked, and to any frame sent after. */
export const CLOSE_KEY_REVOKED = 4401;
/** Sent when a starter-plan org subscribes to the sandbox environment. */
export const CLOSE_SANDBOX_DISABLED = 4402;
export const LIVE_PROTOCOL = 'sluice-live';
/** Bytes a socket may have queued before it is treated as a slow consumer. */
export const MAX_BACKPRESSURE = 1024 * 1024;
const HEARTBEAT_MS = 5000;

interface SocketData {
  readonly orgId: string;
  /** Who opened the socket: it lives only as long as this principal's key. */
  readonly principal: Principal;
  /** What the upgrade URL asked for; `open` acts on it. */
  readonly requested: Subscription;
  /**
   * The room the socket is in, and `sentAfter`: the socket has been sent every update of that room
   * with a higher seq (replayed or live), so a later Subscribe does not send those again.
   */
  joined: { readonly room: Room; readonly sentAfter: number } | undefined;
}

export class LiveRooms {
  readonly #app: TemplatedApp;
  readonly #auth: Authorizer;
  readonly #log: UpdateLog;
  readonly #clock: Clock;
  readonly #orgs: OrganizationStore;
  readonly #sockets = new Set<WebSocket<SocketData>>();
  /** Emits updates to uWS in seq order; replays stop at its last emitted seq so nothing is sent twice. */
  readonly #order: SeqOrder;
  readonly #heartbeat: NodeJS.Timeout;

  constructor(app: TemplatedApp, auth: Authorizer, orgs: OrganizationStore, log: UpdateLog, clock: Clock) {
    this.#app = app;
    this.#auth = auth;
    this.#log = log;
    this.#clock = clock;
    this.#orgs = orgs;
    this.#order = new SeqOrder((orgId) => log.firstIssued(orgId), (orgId, update) => this.#fanOut(orgId, update));
    app.ws<SocketData>('/organizations/:org_id/live', {
      maxPayloadLength: 4096,
      maxBackpressure: MAX_BACKPRESSURE,
      // A message that would be dropped closes the socket instead: a live client never silently misses one.
      // (The uWS 20.30 typings declare this flag as a number.)
      closeOnBackpressureLimit: 1,
      idleTimeout: 60,
      upgrade: (res, req, context) => {
        const orgId = req.getParameter(0) ?? '';
        const query = new URLSearchParams(req.getQuery() ?? '');
        const offered = req.getHeader('sec-websocket-protocol').split(',').map((p) => p.trim()).filter((p) => p !== '');
        const token = query.get('token') ?? offered.find((p) => p !== LIVE_PROTOCOL);
        const key = req.getHeader('sec-websocket-key');
        const extensions = req.getHeader('sec-websocket-extensions');
        const principal = token === undefined ? undefined : auth.principalForToken(token);
        const org = orgs.get(orgId);
        let requested: Subscription | undefined;
        try {
          requested = parseSubscribeQuery(query);
        } catch {
          requested = undefined;
        }
        const allowed = principal !== undefined && org !== undefined && (principal.kind === 'platform_admin' || principal.orgId === orgId);
        const sandboxDenied = org !== undefined && requested?.room.environment === 'sandbox' && !sandboxAllowed(org);
        if (!allowed || requested === undefined || sandboxDenied) {
          const status = principal === undefined ? '401 Unauthorized' : !allowed ? '404 Not Found' : sandboxDenied ? '402 Payment Required' : '400 Bad Request';
          res.writeStatus(status).writeHeader('content-type', 'application/json').end(JSON.stringify({ error: { code: 'live_refused', message: 'The live room needs a valid key of this organization.' } }));
          return;
        }
        const protocol = offered.includes(LIVE_PROTOCOL) ? LIVE_PROTOCOL : (offered[0] ?? '');
        res.upgrade<SocketData>({ orgId, principal, requested, joined: undefined }, key, protocol, extensions, context);
      },
      open: (ws) => {
        this.#sockets.add(ws);
        this.#enter(ws, ws.getUserData().requested);
      },
      message: (ws, message, isBinary) => this.#onMessage(ws, new Uint8Array(message.slice(0)), isBinary),
      close: (ws) => {
        this.#sockets.delete(ws);
      },
    });
    this.#heartbeat = setInterval(() => this.#beat(), HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  /**
   * Fans durable updates out to subscribers in seq order; call only after the write holding them is
   * flushed. An update whose predecessor is not durable yet waits for it (at most GAP_GRACE_MS).
   */
  publish(orgId: string, updates: readonly RunUpdate[]): void {
    this.#order.offer(orgId, updates);
  }

  /** Stops waiting for missing seqs now (tests; production waits GAP_GRACE_MS). */
  releaseGaps(): void {
    this.#order.releaseGaps();
  }

  /** Closes every socket opened with this API key (4401); call once its revocation is durable. */
  closeSocketsOfKey(orgId: string, keyId: string): void {
    for (const ws of [...this.#sockets]) {
      const { principal } = ws.getUserData();
      if (principal.kind === 'api_key' && principal.orgId === orgId && principal.keyId === keyId) this.#refuseRevoked(ws);
    }
  }

  #fanOut(orgId: string, update: RunUpdate): void {
    const frame = encodeLiveMessage({ run_update: update });
    this.#app.publish(topicFor(orgId, { environment: update.environment, runId: '' }), frame, true);
    this.#app.publish(topicFor(orgId, { environment: update.environment, runId: update.run_id }), frame, true);
  }

  get subscriberCount(): number {
    return this.#sockets.size;
  }

  close(): void {
    clearInterval(this.#heartbeat);
    this.#order.close();
    for (const ws of [...this.#sockets]) ws.end(1001, 'server shutting down');
  }

  #publishedSeq(orgId: string): number {
    return this.#order.emitted(orgId) || this.#log.firstIssued(orgId) - 1;
  }

  #refuseRevoked(ws: WebSocket<SocketData>): void {
    ws.end(CLOSE_KEY_REVOKED, 'key_revoked: the API key of this socket was revoked');
  }

  #onMessage(ws: WebSocket<SocketData>, bytes: Uint8Array, isBinary: boolean): void {
    const data = ws.getUserData();
    if (!this.#auth.isStillValid(data.principal)) {
      this.#refuseRevoked(ws);
      return;
    }
    let subscription;
    try {
      if (!isBinary) throw new Error('frames must be binary');
      subscription = parseSubscribeFrame(decodeClientMessage(bytes).subscribe);
    } catch (error) {
      ws.end(CLOSE_PROTOCOL_ERROR, `invalid ClientMessage: ${error instanceof Error ? error.message : 'undecodable'}`.slice(0, 120));
      return;
    }
    const org = this.#orgs.get(data.orgId);
    if (org === undefined || (subscription.room.environment === 'sandbox' && !sandboxAllowed(org))) {
      ws.end(CLOSE_SANDBOX_DISABLED, 'sandbox_disabled: the sandbox is not available on this plan');
      return;
    }
    this.#enter(ws, subscription);
  }

  /**
   * Moves the socket into a room: writes the replay, then joins the room's topic. Both happen in this
   * one synchronous call, so no publish falls between them and live updates begin right after the
   * replay's last seq. The replay leaves out what the socket was already sent in its previous room.
   */
  #enter(ws: WebSocket<SocketData>, { room, afterSeq }: Subscription): void {
    const data = ws.getUserData();
    const publishedSeq = this.#publishedSeq(data.orgId);
    const previous = data.joined;
    if (previous !== undefined) ws.unsubscribe(topicFor(data.orgId, previous.room));
    if (afterSeq !== undefined) {
      const alreadySent = (u: RunUpdate): boolean => previous !== undefined && u.seq > previous.sentAfter && isInRoom(u, previous.room);
      const missed = this.#log.range(data.orgId, afterSeq, publishedSeq).filter((u) => isInRoom(u, room) && !alreadySent(u));
      ws.cork(() => {
        for (const update of missed) ws.send(encodeLiveMessage({ run_update: update }), true);
      });
    }
    ws.subscribe(topicFor(data.orgId, room));
    // A narrower room keeps what the wider one already delivered; otherwise the replay's start counts.
    const keptFrom = previous !== undefined && isRoomWithin(room, previous.room) ? previous.sentAfter : publishedSeq;
    data.joined = { room, sentAfter: Math.min(afterSeq ?? publishedSeq, publishedSeq, keptFrom) };
  }

  #beat(): void {
    const at = this.#clock.now();
    for (const ws of this.#sockets) {
      if (ws.getBufferedAmount() > MAX_BACKPRESSURE / 2) {
        ws.end(CLOSE_SLOW_CONSUMER, 'slow consumer');
        continue;
      }
      ws.send(encodeLiveMessage({ heartbeat: { at_ms: at, last_seq: this.#publishedSeq(ws.getUserData().orgId) } }), true);
    }
  }
}
