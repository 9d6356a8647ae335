// The live WebSocket rooms at /organizations/:org_id/live: authentication at upgrade (and closing on key
// revocation), Subscribe frames, uWS topic fan-out; replays in live-room-entry.ts, heartbeats in live-heartbeat.ts.

import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import { KeyedCounts } from '../../actors/keyed-counts.ts';
import type { Authorizer, Principal } from '../auth/authorize.ts';
import type { Clock } from '../clock.ts';
import { InputError, RetryableError, SluiceError } from '../errors.ts';
import { TokenBucket } from '../token-bucket.ts';
import { StalledReader } from './stalled-reader.ts';
import { LIVE_QUEUE_SLICE, LIVE_QUEUE_SWEEP_MS, LiveQueue } from './live-queue.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import { sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { decodeClientMessage, encodeLiveMessage, type RunUpdate } from './live-codec.ts';
import { HEARTBEAT_MS, heartbeatRound } from './live-heartbeat.ts';
import { ReplayTurns } from './replay-turns.ts';
import { MAX_REMEMBERED_LATE, wasSent } from './live-replay.ts';
import { enterRoom, publishedSeqOf, queueReplayPage, REPLAY_HIGH_WATER, type RoomEntryDeps } from './live-room-entry.ts';
import { MAX_BACKPRESSURE, roomOf, sendCounted, type SocketData } from './live-socket.ts';
import { admitUpgrade, assertLiveProtocolOffered, LIVE_PATH, LIVE_PLAIN_GET, LIVE_PROTOCOL } from './live-upgrade.ts';
import { assertWebSocketHandshake } from '../http/upgrade-required.ts';
import type { UpgradeAnswered } from '../metrics.ts';
import { CLOSE_KEY_REVOKED, CLOSE_ORG_DELETED, CLOSE_POLICY_VIOLATION, CLOSE_PROTOCOL_ERROR, CLOSE_SANDBOX_DISABLED, CLOSE_SANDBOX_RESET, CLOSE_SLOW_CONSUMER } from './live-close-codes.ts';
import { isInRoom, parseSubscribeFrame, topicFor, type Subscription } from './live-subscription.ts';
import { SeqOrder } from './seq-order.ts';
import type { UpdateLog } from './update-log.ts';
import { upgradeToken } from '../http/upgrade-token.ts';
import { ReadQuery } from '../http/read-query.ts';
import { refuseUpgrade } from '../http/refuse-upgrade.ts';
import { assertHeadFits } from '../http/header-cap.ts';
import { namesSomething, Router } from '../http/router.ts';
import type { WebSocketBudget } from '../http/websocket-budget.ts';
import { offeredSubprotocols } from '../http/offered-subprotocols.ts';

/** A ClientMessage's largest frame (a Subscribe names at most one run id of 200 characters): a larger one is refused with 1002. */
export const MAX_CLIENT_FRAME_BYTES = 4096;
/** Frames are read up to this, so one past MAX_CLIENT_FRAME_BYTES is answered; past this uWS cuts the connection (1006). */
const MAX_READ_FRAME_BYTES = 64 * 1024;
/**
 * Subscribe frames a socket may send at once, and per second after that. Each one may start a replay
 * that reads the retained log on the event loop, so a flood of them (a few bytes each) would stall
 * every tenant; a client changing its filter as a person types stays well inside this.
 */
export const SUBSCRIBE_BURST = 20;
export const SUBSCRIBE_PER_SECOND = 5;
/** Live sockets one org may hold open at once by default (--live-sockets-per-org). */
export const DEFAULT_LIVE_SOCKETS_PER_ORG = 20_000;

export class LiveRooms {
  readonly #app: TemplatedApp;
  readonly #auth: Authorizer;
  readonly #clock: Clock;
  readonly #orgs: OrganizationStore;
  readonly #sockets = new Set<WebSocket<SocketData>>();
  /** Open sockets per org, held to `#socketsPerOrg`. */
  readonly #perOrg = new KeyedCounts();
  /** Emits updates to uWS in seq order; replays stop at its last emitted seq so nothing is sent twice. */
  readonly #order: SeqOrder;
  /** What moves sockets between rooms (live-room-entry.ts). */
  readonly #entry: RoomEntryDeps;
  readonly #heartbeat: NodeJS.Timeout;
  /** What the sockets hold queued, unread (live-queue.ts). */
  readonly #queue: LiveQueue;
  readonly #queueSweep: NodeJS.Timeout;
  /** Set by close(): the runtime is stopping, and an upgrade now would only be cut off without a close frame. */
  #closed = false;

  /** Live sockets one org may hold open at once (--live-sockets-per-org). */
  readonly #socketsPerOrg: number;
  /** WebSockets the process holds open at once, device sockets included (--websockets). */
  readonly #websockets: WebSocketBudget;

  constructor(app: TemplatedApp, auth: Authorizer, orgs: OrganizationStore, log: UpdateLog, clock: Clock, limits: { readonly socketsPerOrg: number; readonly websockets: WebSocketBudget; readonly answered: UpgradeAnswered; readonly queuedBytes?: number }) {
    this.#socketsPerOrg = limits.socketsPerOrg;
    this.#websockets = limits.websockets;
    this.#app = app;
    this.#auth = auth;
    this.#clock = clock;
    this.#orgs = orgs;
    this.#order = new SeqOrder((orgId) => log.firstIssued(orgId), (orgId, update, late) => this.#fanOut(orgId, update, late));
    this.#queue = new LiveQueue(limits.queuedBytes);
    this.#entry = { log, order: this.#order, turns: new ReplayTurns(), clock, queue: this.#queue };
    app.ws<SocketData>(LIVE_PATH, {
      // Read up to MAX_READ_FRAME_BYTES so that a frame past MAX_CLIENT_FRAME_BYTES gets its 1002 (uWS
      // cuts a connection past its own cap with no close frame: a client would take it for a network drop).
      maxPayloadLength: MAX_READ_FRAME_BYTES,
      maxBackpressure: MAX_BACKPRESSURE,
      // A message that would be dropped closes the socket instead: a live client never silently misses one.
      // (The uWS 20.30 typings declare this flag as a number.)
      closeOnBackpressureLimit: 1,
      idleTimeout: 60,
      upgrade: (res, req, context) => {
        const started = performance.now();
        const rawOrgId = req.getParameter(0) ?? '';
        const query = new ReadQuery(req.getQuery() ?? '');
        const offered = offeredSubprotocols(req);
        const key = req.getHeader('sec-websocket-key');
        const extensions = req.getHeader('sec-websocket-extensions');
        let admitted: { principal: Principal; requested: Subscription };
        let orgId: string;
        try {
          assertHeadFits(req);
          assertWebSocketHandshake(req, LIVE_PLAIN_GET);
          assertLiveProtocolOffered(offered);
          const token = upgradeToken(query.get('token'), offered, LIVE_PROTOCOL);
          const principal = token === undefined ? undefined : auth.principalForToken(token);
          orgId = Router.decodeSegment(rawOrgId);
          if (this.#closed) throw new RetryableError('stopping', 'Sluice is stopping; connect again in a few seconds.', 2000);
          // Past the REST routes' parameter cap an org id names nothing (and would not fit a store key): 404 as unknown.
          admitted = admitUpgrade(principal, namesSomething(orgId) ? orgs.get(orgId) : undefined, orgId, query);
          // Each socket holds memory and may replay the log: one org (one leaked key) cannot open them without end.
          if (this.#perOrg.get(orgId) >= this.#socketsPerOrg) {
            throw new SluiceError(429, 'too_many_live_sockets', `An organization may hold at most ${this.#socketsPerOrg} live sockets open at once; close one first.`);
          }
          this.#websockets.assertRoom(orgId);
          // As a GET is: `?enviroment=sandbox` would otherwise stream production updates.
          query.assertNoRepeats();
          query.assertAllAsked();
        } catch (error) {
          const refusal = error instanceof SluiceError ? error : new InputError(400, 'invalid_subscription', 'The live room request is malformed.');
          refuseUpgrade(res, refusal);
          limits.answered(LIVE_PATH, refusal.status, started);
          return;
        }
        // Never an offered entry other than LIVE_PROTOCOL: that one is the API key.
        const protocol = offered.length > 0 ? LIVE_PROTOCOL : '';
        const fresh = { state: { status: 'opening' } as const, subscribeFrames: 0, subscribeAllowance: new TokenBucket(SUBSCRIBE_BURST, SUBSCRIBE_PER_SECOND, clock.now()), reader: new StalledReader(), queued: 0 };
        res.upgrade<SocketData>({ orgId, ...admitted, ...fresh }, key, protocol, extensions, context);
        limits.answered(LIVE_PATH, 101, started);
      },
      open: (ws) => {
        this.#websockets.opened(ws.getUserData().orgId);
        this.#sockets.add(ws);
        this.#perOrg.add(ws.getUserData().orgId);
        enterRoom(this.#entry, ws, ws.getUserData().requested);
      },
      message: (ws, message, isBinary) => {
        if (message.byteLength > MAX_CLIENT_FRAME_BYTES) {
          ws.getUserData().state = { status: 'closed' };
          ws.end(CLOSE_PROTOCOL_ERROR, `invalid ClientMessage: a frame has at most ${MAX_CLIENT_FRAME_BYTES} bytes`);
          return;
        }
        this.#onMessage(ws, new Uint8Array(message.slice(0)), isBinary);
      },
      drain: (ws) => {
        const data = ws.getUserData();
        this.#queue.count(ws);
        data.reader.drained();
        if (data.state.status === 'replaying') queueReplayPage(this.#entry, ws, data, data.state.replay);
      },
      close: (ws) => {
        this.#websockets.closed(ws.getUserData().orgId);
        this.#sockets.delete(ws);
        this.#perOrg.subtract(ws.getUserData().orgId);
        this.#queue.forget(ws.getUserData());
        ws.getUserData().state = { status: 'closed' };
      },
    });
    this.#heartbeat = setInterval(() => this.heartbeat(), HEARTBEAT_MS);
    this.#heartbeat.unref();
    this.#queueSweep = setInterval(() => void this.sweepQueue(), LIVE_QUEUE_SWEEP_MS);
    this.#queueSweep.unref();
  }

  /** Bytes the sockets held queued at their last look, over every org (live-queue.ts). */
  get queuedBytes(): number {
    return this.#queue.held;
  }

  /**
   * Counts what every socket holds queued, lets replays that waited for room go on, then closes the
   * largest holders of an org past its share, and past the total those of the org holding the most
   * (4008); every LIVE_QUEUE_SWEEP_MS. Sockets are taken LIVE_QUEUE_SLICE per event-loop turn
   * (14,000 in one go held every request ~6 ms); resolves once the last slice is done, with how
   * many sockets it closed (tests wait for it).
   */
  async sweepQueue(): Promise<number> {
    const sockets = [...this.#sockets];
    for (let from = 0; from < sockets.length; from += LIVE_QUEUE_SLICE) {
      if (from > 0) await new Promise((resolve) => setImmediate(resolve));
      if (this.#closed) return 0;
      for (const ws of sockets.slice(from, from + LIVE_QUEUE_SLICE)) {
        // Closed since the sweep began: a closed uWS socket must not be touched.
        if (!this.#sockets.has(ws)) continue;
        this.#queue.count(ws);
        const data = ws.getUserData();
        if (data.state.status === 'replaying' && !data.state.replay.scheduled && data.queued < REPLAY_HIGH_WATER) queueReplayPage(this.#entry, ws, data, data.state.replay);
      }
    }
    return this.#queue.closeLargestOverShare(this.#sockets, (ws) => {
      ws.getUserData().state = { status: 'closed' };
      ws.end(CLOSE_SLOW_CONSUMER, "slow consumer: this organization's live sockets hold too much unread");
    });
  }

  /**
   * Fans durable updates out to subscribers in seq order; call only after the write holding them is
   * flushed. An update whose predecessor is not durable yet waits for it (at most GAP_GRACE_MS).
   */
  publish(orgId: string, updates: readonly RunUpdate[]): void {
    this.#order.offer(orgId, updates);
  }

  /** The highest seq of the org sent out to its sockets (0 when none): later ones wait for a predecessor. */
  emittedSeq(orgId: string): number {
    return this.#order.emitted(orgId);
  }

  /** Lets go of the org's place in the seq order once its removal is finished (its sockets were closed when it was deleted). */
  forgetOrg(orgId: string): void {
    this.#order.forget(orgId);
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

  /** Closes every socket of a deleted org (4404), the platform admin's too. */
  closeSocketsOfOrg(orgId: string): void {
    for (const ws of [...this.#sockets]) if (ws.getUserData().orgId === orgId) ws.end(CLOSE_ORG_DELETED, 'organization_deleted: the organization was deleted');
  }

  /** Closes the org's sandbox sockets (4402) when its plan no longer has a sandbox; call after a plan change. */
  closeSandboxSocketsIfDisallowed(orgId: string): void {
    const org = this.#orgs.get(orgId);
    if (org === undefined || sandboxAllowed(org)) return;
    this.#closeSandboxSockets(orgId, CLOSE_SANDBOX_DISABLED, 'sandbox_disabled: the sandbox is not available on this plan');
  }

  /**
   * Once a sandbox reset is durable: closes the org's sandbox sockets (4409), so clients drop the
   * runs it deleted, and passes over the reset's mark (`markSeq`, see UpdateLog.removeEnvironment),
   * updates before it still on their way to disk then sent late (SeqOrder.passOverSkippingEarlier).
   */
  closeSandboxSocketsAfterReset(orgId: string, markSeq: number): void {
    this.#order.passOverSkippingEarlier(orgId, markSeq);
    this.#closeSandboxSockets(orgId, CLOSE_SANDBOX_RESET, 'sandbox_reset: the sandbox was reset; reload, then reconnect');
  }

  /**
   * A sandbox reset failed, perhaps after it committed (a failed flush): the runs its sandbox
   * sockets show may be gone, so they close (4409) as after a reset. Its mark, if committed, is
   * passed as a gap.
   */
  closeSandboxSocketsAfterUnconfirmedReset(orgId: string): void {
    this.#closeSandboxSockets(orgId, CLOSE_SANDBOX_RESET, 'sandbox_reset: the sandbox reset could not be confirmed; reload, then reconnect');
  }

  #closeSandboxSockets(orgId: string, code: number, reason: string): void {
    for (const ws of [...this.#sockets]) {
      const data = ws.getUserData();
      if (data.orgId === orgId && roomOf(data)?.environment === 'sandbox') ws.end(code, reason);
    }
  }

  #fanOut(orgId: string, update: RunUpdate, late: boolean): void {
    const orgTopic = topicFor(orgId, { environment: update.environment, runId: '' });
    const runTopic = topicFor(orgId, { environment: update.environment, runId: update.run_id });
    // A frame no socket would get is not encoded: boot recovery publishes every reclaimed run's
    // updates, mostly before anyone has connected, and most orgs have no one watching most of the time.
    if (!late && this.#app.numSubscribers(orgTopic) === 0 && this.#app.numSubscribers(runTopic) === 0) return;
    const frame = encodeLiveMessage({ run_update: update });
    this.#app.publish(orgTopic, frame, true);
    this.#app.publish(runTopic, frame, true);
    if (late) this.#deliverLate(orgId, update, frame);
  }

  /**
   * An update released after later ones (its write became durable past GAP_GRACE_MS), in one scan
   * of the org's sockets (rare, so a scan is fine):
   * - every replay that read past its seq left it out (the replay's `gaps`: missing from the log,
   *   or there but not yet durable), and every replay that started past it never reads it; a
   *   replaying socket is on no topic: it is sent to each such replay (unless the socket was sent it
   *   before), so no socket loses it (one that joined its topic after such a replay gets it there);
   *   one below the replay's start is remembered as a live socket's is, for its next Subscribe;
   * - a live socket that joined after its seq gets it over its topic, below the range its leaving
   *   records (sentWhileLive): it remembers it, or its next Subscribe would send it again.
   */
  #deliverLate(orgId: string, update: RunUpdate, frame: Uint8Array): void {
    for (const ws of this.#sockets) {
      const data = ws.getUserData();
      const { state } = data;
      if (data.orgId !== orgId) continue;
      if (state.status === 'replaying') {
        const { replay } = state;
        const belowStart = update.seq <= replay.start;
        if (!(replay.gaps.delete(update.seq) || belowStart) || !isInRoom(update, replay.room) || wasSent(replay.earlier, update)) continue;
        sendCounted(ws, frame);
        if (belowStart && replay.late.size < MAX_REMEMBERED_LATE) replay.late.add(update.seq);
      } else if (state.status === 'live' && update.seq <= state.from && isInRoom(update, state.room) && state.late.size < MAX_REMEMBERED_LATE) {
        state.late.add(update.seq);
      }
    }
  }

  get subscriberCount(): number {
    return this.#sockets.size;
  }

  /** Open sockets still catching up from the log (not yet on their live topic). */
  get replayingCount(): number {
    let count = 0;
    for (const ws of this.#sockets) if (ws.getUserData().state.status === 'replaying') count++;
    return count;
  }

  /** Closes every socket with 1001; upgrades from now on are refused (503 stopping, Retry-After). */
  close(): void {
    this.#closed = true;
    clearInterval(this.#heartbeat);
    clearInterval(this.#queueSweep);
    this.#order.close();
    for (const ws of [...this.#sockets]) ws.end(1001, 'server shutting down');
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
    if (!this.#allowFrame(data)) {
      data.state = { status: 'closed' };
      ws.end(CLOSE_POLICY_VIOLATION, `subscribe_rate_exceeded: at most ${SUBSCRIBE_BURST} Subscribe frames at once, then ${SUBSCRIBE_PER_SECOND} per second`);
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
    data.subscribeFrames += 1;
    enterRoom(this.#entry, ws, subscription);
  }

  /** Takes one frame from the socket's allowance; false when none is left. */
  #allowFrame(data: SocketData): boolean {
    return data.subscribeAllowance.take(this.#clock.now()) === 0;
  }

  /** One heartbeat to every socket, closing slow and stalled consumers first (every HEARTBEAT_MS; tests call it). */
  heartbeat(): void {
    heartbeatRound({ open: this.#sockets, publishedSeq: (orgId) => publishedSeqOf(this.#entry, orgId), stopped: () => this.#closed }, this.#clock.now());
  }
}
