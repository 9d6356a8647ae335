// The live WebSocket rooms at /organizations/:org_id/live: authentication at upgrade, Subscribe with
// replay from the retained log, live fan-out through uWS topics, heartbeats and slow-consumer closes.

import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import type { Authorizer } from '../auth/authorize.ts';
import type { Clock } from '../clock.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import { sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { decodeClientMessage, encodeLiveMessage, type RunUpdate } from './live-codec.ts';
import { SeqOrder } from './seq-order.ts';
import type { UpdateLog } from './update-log.ts';

/**
 * Close codes a live client must handle (see README, "Live rooms"). A slow consumer is closed with
 * 4008 when the heartbeat sees half the backpressure budget queued, or dropped by uWS (1006, no close
 * frame) the moment a message would exceed it; either way it reconnects with `after_seq`.
 */
export const CLOSE_PROTOCOL_ERROR = 1002;
export const CLOSE_SLOW_CONSUMER = 4008;
/** Sent when a starter-plan org subscribes to the sandbox environment. */
export const CLOSE_SANDBOX_DISABLED = 4402;
export const LIVE_PROTOCOL = 'sluice-live';
/** Bytes a socket may have queued before it is treated as a slow consumer. */
export const MAX_BACKPRESSURE = 1024 * 1024;
const HEARTBEAT_MS = 5000;
const ENVIRONMENTS = new Set(['production', 'sandbox']);

interface SocketData {
  orgId: string;
  topic: string;
}

const topicFor = (orgId: string, environment: string, runId: string): string =>
  runId === '' ? `live/${orgId}/${environment}` : `live/${orgId}/${environment}/run/${runId}`;

export class LiveRooms {
  readonly #app: TemplatedApp;
  readonly #log: UpdateLog;
  readonly #clock: Clock;
  readonly #orgs: OrganizationStore;
  readonly #sockets = new Set<WebSocket<SocketData>>();
  /** Emits updates to uWS in seq order; replays stop at its last emitted seq so nothing is sent twice. */
  readonly #order: SeqOrder;
  readonly #heartbeat: NodeJS.Timeout;

  constructor(app: TemplatedApp, auth: Authorizer, orgs: OrganizationStore, log: UpdateLog, clock: Clock) {
    this.#app = app;
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
        const offered = req.getHeader('sec-websocket-protocol').split(',').map((p) => p.trim()).filter((p) => p !== '');
        const token = new URLSearchParams(req.getQuery() ?? '').get('token') ?? offered.find((p) => p !== LIVE_PROTOCOL);
        const environment = new URLSearchParams(req.getQuery() ?? '').get('environment') ?? 'production';
        const key = req.getHeader('sec-websocket-key');
        const extensions = req.getHeader('sec-websocket-extensions');
        const principal = token === undefined ? undefined : auth.principalForToken(token);
        const org = orgs.get(orgId);
        const allowed = principal !== undefined && org !== undefined && (principal.kind === 'platform_admin' || principal.orgId === orgId);
        const sandboxDenied = org !== undefined && environment === 'sandbox' && !sandboxAllowed(org);
        if (!allowed || !ENVIRONMENTS.has(environment) || sandboxDenied) {
          const status = principal === undefined ? '401 Unauthorized' : !allowed ? '404 Not Found' : sandboxDenied ? '402 Payment Required' : '400 Bad Request';
          res.writeStatus(status).writeHeader('content-type', 'application/json').end(JSON.stringify({ error: { code: 'live_refused', message: 'The live room needs a valid key of this organization.' } }));
          return;
        }
        const protocol = offered.includes(LIVE_PROTOCOL) ? LIVE_PROTOCOL : (offered[0] ?? '');
        res.upgrade<SocketData>({ orgId, topic: topicFor(orgId, environment, '') }, key, protocol, extensions, context);
      },
      open: (ws) => {
        this.#sockets.add(ws);
        ws.subscribe(ws.getUserData().topic);
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

  #fanOut(orgId: string, update: RunUpdate): void {
    const frame = encodeLiveMessage({ run_update: update });
    this.#app.publish(topicFor(orgId, update.environment, ''), frame, true);
    this.#app.publish(topicFor(orgId, update.environment, update.run_id), frame, true);
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

  #onMessage(ws: WebSocket<SocketData>, bytes: Uint8Array, isBinary: boolean): void {
    let subscribe;
    try {
      if (!isBinary) throw new Error('frames must be binary');
      subscribe = decodeClientMessage(bytes).subscribe;
      if (subscribe.environment !== '' && !ENVIRONMENTS.has(subscribe.environment)) throw new Error('unknown environment');
      if (subscribe.run_id.length > 200) throw new Error('run_id too long');
    } catch (error) {
      ws.end(CLOSE_PROTOCOL_ERROR, `invalid ClientMessage: ${error instanceof Error ? error.message : 'undecodable'}`.slice(0, 120));
      return;
    }
    const data = ws.getUserData();
    const environment = subscribe.environment === '' ? 'production' : subscribe.environment;
    const org = this.#orgs.get(data.orgId);
    if (org === undefined || (environment === 'sandbox' && !sandboxAllowed(org))) {
      ws.end(CLOSE_SANDBOX_DISABLED, 'sandbox_disabled: the sandbox is not available on this plan');
      return;
    }
    ws.unsubscribe(data.topic);
    data.topic = topicFor(data.orgId, environment, subscribe.run_id);
    const missed = this.#log
      .range(data.orgId, subscribe.after_seq, this.#publishedSeq(data.orgId))
      .filter((u) => u.environment === environment && (subscribe.run_id === '' || u.run_id === subscribe.run_id));
    ws.cork(() => {
      for (const update of missed) ws.send(encodeLiveMessage({ run_update: update }), true);
    });
    ws.subscribe(data.topic);
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
