// The live WebSocket rooms at /organizations/:org_id/live: authentication at upgrade (and closing on key
// revocation), Subscribe with a paced replay from the retained log, uWS topic fan-out, heartbeats, slow consumers.

import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import { KeyedCounts } from '../../actors/keyed-counts.ts';
import type { Authorizer, Principal } from '../auth/authorize.ts';
import type { Clock } from '../clock.ts';
import { InputError, RetryableError, SluiceError } from '../errors.ts';
import { TokenBucket } from '../token-bucket.ts';
import { StalledReader } from './stalled-reader.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import { sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { decodeClientMessage, encodeLiveMessage, type RunUpdate } from './live-codec.ts';
import { ReplayTurns } from './replay-turns.ts';
import { MAX_REMEMBERED_GAPS, MAX_REMEMBERED_LATE, nextPage, sentSoFar, sentWhileLive, startAtRetained, startReplay, wasSent, type Replay, type Sent } from './live-replay.ts';
import { admitUpgrade, LIVE_PROTOCOL } from './live-upgrade.ts';
import { CLOSE_KEY_REVOKED, CLOSE_POLICY_VIOLATION, CLOSE_PROTOCOL_ERROR, CLOSE_REPLAY_GONE, CLOSE_SANDBOX_DISABLED, CLOSE_SANDBOX_RESET, CLOSE_SLOW_CONSUMER } from './live-close-codes.ts';
import { isInRoom, isRoomWithin, parseSubscribeFrame, topicFor, type Room, type Subscription } from './live-subscription.ts';
import { SeqOrder } from './seq-order.ts';
import type { UpdateLog } from './update-log.ts';
import { upgradeToken } from '../http/upgrade-token.ts';
import { ReadQuery } from '../http/read-query.ts';
import { refuseUpgrade } from '../http/refuse-upgrade.ts';
import { namesSomething, Router } from '../http/router.ts';
import type { WebSocketBudget } from '../http/websocket-budget.ts';

/** Bytes a socket may have queued before it is treated as a slow consumer. */
export const MAX_BACKPRESSURE = 1024 * 1024;
/**
 * A replay sends its next page only while less than this is queued, and goes on when the socket
 * drains: a backlog of any size reaches a client that keeps reading, and stays clear of the 4008 check.
 */
export const REPLAY_HIGH_WATER = MAX_BACKPRESSURE / 4;
/** A ClientMessage's largest frame (a Subscribe names at most one run id of 200 characters): a larger one is refused with 1002. */
export const MAX_CLIENT_FRAME_BYTES = 4096;
/** Frames are read up to this, so one past MAX_CLIENT_FRAME_BYTES is answered; past this uWS cuts the connection (1006). */
const MAX_READ_FRAME_BYTES = 64 * 1024;
const HEARTBEAT_MS = 5000;
/** Sockets one event-loop turn of a heartbeat round sends to (LiveRooms.heartbeat). */
const HEARTBEAT_SLICE = 1000;
/**
 * Subscribe frames a socket may send at once, and per second after that. Each one may start a replay
 * that reads the retained log on the event loop, so a flood of them (a few bytes each) would stall
 * every tenant; a client changing its filter as a person types stays well inside this.
 */
export const SUBSCRIBE_BURST = 20;
export const SUBSCRIBE_PER_SECOND = 5;
/** Live sockets one org may hold open at once by default (--live-sockets-per-org). */
export const DEFAULT_LIVE_SOCKETS_PER_ORG = 20_000;

interface SocketData {
  readonly orgId: string;
  /** Who opened the socket: it lives only as long as this principal's key. */
  readonly principal: Principal;
  /** What the upgrade URL asked for; `open` acts on it. */
  readonly requested: Subscription;
  state: SocketState;
  /** Subscribe frames applied so far; every heartbeat says it, so a client knows which frames follow its last one. */
  subscribeFrames: number;
  /** Subscribe frames the socket may still send (SUBSCRIBE_BURST, refilled at SUBSCRIBE_PER_SECOND). */
  readonly subscribeAllowance: TokenBucket;
  /** Whether its reader stopped reading what is queued for it (stalled-reader.ts). */
  readonly reader: StalledReader;
}

/**
 * `replaying`: catching up from the log, on no topic yet. `live`: on its room's topic, sent every
 * update of it after `from` (replayed, then live) besides what its earlier subscriptions were sent,
 * so a later Subscribe does not send any of it again. A replay whose socket is no longer
 * `replaying` that very replay stops at its next step.
 */
type SocketState =
  | { readonly status: 'opening' }
  | { readonly status: 'replaying'; readonly replay: Replay }
  | {
      readonly status: 'live';
      readonly room: Room;
      readonly from: number;
      readonly earlier: Sent;
      /** Updates published late with a seq at or below `from` that its topic delivered (#deliverLate). */
      readonly late: Set<number>;
    }
  | { readonly status: 'closed' };

export class LiveRooms {
  readonly #app: TemplatedApp;
  readonly #auth: Authorizer;
  readonly #log: UpdateLog;
  readonly #clock: Clock;
  readonly #orgs: OrganizationStore;
  readonly #sockets = new Set<WebSocket<SocketData>>();
  /** Open sockets per org, held to `#socketsPerOrg`. */
  readonly #perOrg = new KeyedCounts();
  /** Replays' pages, a few per event-loop turn, orgs in turn. */
  readonly #turns = new ReplayTurns();
  /** Emits updates to uWS in seq order; replays stop at its last emitted seq so nothing is sent twice. */
  readonly #order: SeqOrder;
  readonly #heartbeat: NodeJS.Timeout;
  /** Set by close(): the runtime is stopping, and an upgrade now would only be cut off without a close frame. */
  #closed = false;

  /** Live sockets one org may hold open at once (--live-sockets-per-org). */
  readonly #socketsPerOrg: number;
  /** WebSockets the process holds open at once, device sockets included (--websockets). */
  readonly #websockets: WebSocketBudget;

  constructor(app: TemplatedApp, auth: Authorizer, orgs: OrganizationStore, log: UpdateLog, clock: Clock, limits: { readonly socketsPerOrg: number; readonly websockets: WebSocketBudget }) {
    this.#socketsPerOrg = limits.socketsPerOrg;
    this.#websockets = limits.websockets;
    this.#app = app;
    this.#auth = auth;
    this.#log = log;
    this.#clock = clock;
    this.#orgs = orgs;
    this.#order = new SeqOrder((orgId) => log.firstIssued(orgId), (orgId, update, late) => this.#fanOut(orgId, update, late));
    app.ws<SocketData>('/organizations/:org_id/live', {
      // Read up to MAX_READ_FRAME_BYTES so that a frame past MAX_CLIENT_FRAME_BYTES gets its 1002 (uWS
      // cuts a connection past its own cap with no close frame: a client would take it for a network drop).
      maxPayloadLength: MAX_READ_FRAME_BYTES,
      maxBackpressure: MAX_BACKPRESSURE,
      // A message that would be dropped closes the socket instead: a live client never silently misses one.
      // (The uWS 20.30 typings declare this flag as a number.)
      closeOnBackpressureLimit: 1,
      idleTimeout: 60,
      upgrade: (res, req, context) => {
        const rawOrgId = req.getParameter(0) ?? '';
        const query = new ReadQuery(req.getQuery() ?? '');
        const offered = req.getHeader('sec-websocket-protocol').split(',').map((p) => p.trim()).filter((p) => p !== '');
        const key = req.getHeader('sec-websocket-key');
        const extensions = req.getHeader('sec-websocket-extensions');
        let admitted: { principal: Principal; requested: Subscription };
        let orgId: string;
        try {
          const token = upgradeToken(query.get('token'), offered, LIVE_PROTOCOL);
          const principal = token === undefined ? undefined : auth.principalForToken(token);
          orgId = Router.decodeSegment(rawOrgId);
          if (this.#closed) throw new RetryableError('stopping', 'Sluice is stopping; connect again in a few seconds.', 2000);
          // Past the REST routes' parameter cap an org id names nothing (and would not fit a store key): 404 as unknown.
          admitted = admitUpgrade(principal, namesSomething(orgId) ? orgs.get(orgId) : undefined, orgId, query, offered);
          // Each socket holds memory and may replay the log: one org (one leaked key) cannot open them without end.
          if (this.#perOrg.get(orgId) >= this.#socketsPerOrg) {
            throw new SluiceError(429, 'too_many_live_sockets', `An organization may hold at most ${this.#socketsPerOrg} live sockets open at once; close one first.`);
          }
          this.#websockets.assertRoom(orgId);
          // As a GET is: `?enviroment=sandbox` would otherwise stream production updates.
          query.assertNoRepeats();
          query.assertAllAsked();
        } catch (error) {
          refuseUpgrade(res, error instanceof SluiceError ? error : new InputError(400, 'invalid_subscription', 'The live room request is malformed.'));
          return;
        }
        // Never an offered entry other than LIVE_PROTOCOL: that one is the API key.
        const protocol = offered.length > 0 ? LIVE_PROTOCOL : '';
        const fresh = { state: { status: 'opening' } as const, subscribeFrames: 0, subscribeAllowance: new TokenBucket(SUBSCRIBE_BURST, SUBSCRIBE_PER_SECOND, clock.now()), reader: new StalledReader() };
        res.upgrade<SocketData>({ orgId, ...admitted, ...fresh }, key, protocol, extensions, context);
      },
      open: (ws) => {
        this.#websockets.opened(ws.getUserData().orgId);
        this.#sockets.add(ws);
        this.#perOrg.add(ws.getUserData().orgId);
        this.#enter(ws, ws.getUserData().requested);
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
        data.reader.drained();
        if (data.state.status === 'replaying') this.#queuePage(ws, data, data.state.replay);
      },
      close: (ws) => {
        this.#websockets.closed(ws.getUserData().orgId);
        this.#sockets.delete(ws);
        this.#perOrg.subtract(ws.getUserData().orgId);
        ws.getUserData().state = { status: 'closed' };
      },
    });
    this.#heartbeat = setInterval(() => this.heartbeat(), HEARTBEAT_MS);
    this.#heartbeat.unref();
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
   *   or there but not yet durable), and a replaying socket is on no topic: it is sent to each such
   *   replay, so no socket loses it (one that joined its topic after such a replay gets it there);
   * - a live socket that joined after its seq gets it over its topic, below the range its leaving
   *   records (sentWhileLive): it remembers it, or its next Subscribe would send it again.
   */
  #deliverLate(orgId: string, update: RunUpdate, frame: Uint8Array): void {
    for (const ws of this.#sockets) {
      const data = ws.getUserData();
      const { state } = data;
      if (data.orgId !== orgId) continue;
      if (state.status === 'replaying') {
        if (state.replay.gaps.delete(update.seq) && isInRoom(update, state.replay.room) && !wasSent(state.replay.earlier, update)) sendCounted(ws, frame);
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
    this.#enter(ws, subscription);
  }

  /** Takes one frame from the socket's allowance; false when none is left. */
  #allowFrame(data: SocketData): boolean {
    return data.subscribeAllowance.take(this.#clock.now()) === 0;
  }

  /**
   * Moves the socket into a room. Without `afterSeq` it joins the room's topic at once; with it, it
   * leaves its topic and is replayed the retained updates after `afterSeq` (#pump), leaving out what
   * it was already sent in its previous room or replay, and joins the topic once caught up.
   */
  #enter(ws: WebSocket<SocketData>, { room, afterSeq, strict }: Subscription): void {
    const data = ws.getUserData();
    // A position from before a sandbox reset: the client may show runs the reset removed, and a
    // replay would only leave their updates out. It reloads instead (after_seq 0 is refused only
    // when strict: otherwise it asks for whatever is retained).
    const resetSeq = room.environment === 'sandbox' && afterSeq !== undefined ? this.#log.resetSeq(data.orgId, 'sandbox') : 0;
    if (afterSeq !== undefined && resetSeq > 0 && afterSeq <= resetSeq && (afterSeq > 0 || strict)) {
      data.state = { status: 'closed' };
      ws.end(CLOSE_SANDBOX_RESET, `sandbox_reset: the sandbox was reset after seq ${afterSeq}; reload, then reconnect without after_seq`);
      return;
    }
    const publishedSeq = this.#publishedSeq(data.orgId);
    const earlier = this.#leave(ws, data, publishedSeq, afterSeq);
    // A frame sent while leaving can exceed the backpressure limit, which closes the socket.
    if (data.state.status === 'closed') return;
    if (afterSeq === undefined) {
      this.#join(ws, data, room, undefined, publishedSeq, earlier);
      return;
    }
    const replay = startReplay(room, afterSeq, earlier, strict);
    data.state = { status: 'replaying', replay };
    this.#queuePage(ws, data, replay);
  }

  /**
   * Stops the socket's replay or leaves its topic; returns what it had been sent. `nextAfterSeq` is
   * where the socket's next subscription starts (undefined: live from now).
   */
  #leave(ws: WebSocket<SocketData>, data: SocketData, publishedSeq: number, nextAfterSeq: number | undefined): Sent {
    const { state } = data;
    if (state.status !== 'live' && state.status !== 'replaying') return [];
    // The boundary: frames before this heartbeat belong to the earlier subscription, and it carries
    // the new Subscribe's count. Its position is one the new subscription holds too: a replay from
    // after_seq follows it. uWS holds each subscriber's topic messages until the end of the loop
    // turn and drops the ones still held when it unsubscribes; this send delivers them first.
    this.#sendHeartbeat(ws, Math.min(publishedSeq, nextAfterSeq ?? publishedSeq));
    if (state.status === 'replaying') return sentSoFar(state.replay);
    if (data.state.status !== 'live') return [];
    ws.unsubscribe(topicFor(data.orgId, state.room));
    // The topic delivered everything fanned out until now, and nothing more; not a gap skipped
    // meanwhile that may still arrive late (it was not sent, and the replay must send it).
    return sentWhileLive(state.earlier, state.room, state.from, publishedSeq, this.#order.skippedBetween(data.orgId, state.from, publishedSeq), state.late);
  }

  /** Queues the replay's next page for its org's turn (replay-turns.ts), unless one is queued already. */
  #queuePage(ws: WebSocket<SocketData>, data: SocketData, replay: Replay): void {
    if (replay.scheduled) return;
    replay.scheduled = true;
    this.#turns.add(data.orgId, () => {
      replay.scheduled = false;
      return this.#pump(ws, data, replay);
    });
  }

  /**
   * Sends the replay's next page while less than REPLAY_HIGH_WATER is queued, then queues the next,
   * or waits for `drain` once the queue is that long. The last page (reaching the last seq fanned
   * out) is read, sent and followed by joining the topic in this one synchronous call: no publish
   * falls in between, so live updates begin right after the replay's last seq, each exactly once.
   * Answers whether it read the log.
   */
  #pump(ws: WebSocket<SocketData>, data: SocketData, replay: Replay): boolean {
    // Closed, or a later Subscribe replaced this replay: `ws` must not be touched once closed.
    if (data.state.status !== 'replaying' || data.state.replay !== replay) return false;
    const budget = REPLAY_HIGH_WATER - ws.getBufferedAmount();
    if (budget <= 0) return false;
    // after_seq 0 asks for whatever is retained (unless strict): it starts there. Any other position
    // must still be in the log, unless the socket was already sent that stretch (a Subscribe on a
    // socket that was live).
    const oldest = this.#log.oldestRetained(data.orgId);
    startAtRetained(replay, oldest);
    const coveredEarlier = replay.earlier.some((sent) => isRoomWithin(replay.room, sent.room) && sent.after <= replay.cursor && sent.upTo >= oldest - 1);
    if (replay.cursor + 1 < oldest && !coveredEarlier) {
      data.state = { status: 'closed' };
      ws.end(CLOSE_REPLAY_GONE, `replay_gone: updates after seq ${replay.cursor} are no longer retained (oldest: ${oldest})`);
      return false;
    }
    const publishedSeq = this.#publishedSeq(data.orgId);
    // A position past every update sent out cannot come from this log (its data dir was replaced,
    // or the position from another org): following it would skip every update up to it, silently.
    if (replay.after > publishedSeq) {
      data.state = { status: 'closed' };
      ws.end(CLOSE_REPLAY_GONE, `replay_gone: after_seq ${replay.after} is past the last update sent (seq ${publishedSeq}); reload and subscribe live`);
      return false;
    }
    const skipped = { isSkipped: (seq: number) => this.#order.isSkipped(data.orgId, seq), between: (after: number, upTo: number) => this.#order.skippedBetween(data.orgId, after, upTo) };
    const page = nextPage(this.#log, data.orgId, replay, publishedSeq, budget, skipped);
    if (page.frames.length > 0 || page.gapsFull === true) {
      ws.cork(() => {
        for (const frame of page.frames) sendCounted(ws, frame);
      });
      // A frame over the backpressure limit closes the socket (closeOnBackpressureLimit).
      if (data.state.status !== 'replaying') return true;
      if (page.gapsFull === true) {
        data.state = { status: 'closed' };
        ws.end(CLOSE_REPLAY_GONE, `replay_gone: more than ${MAX_REMEMBERED_GAPS} updates of this replay are not on disk yet (failed writes); reload, then reconnect`);
        return false;
      }
    }
    if (page.caughtUp) this.#join(ws, data, replay.room, replay.start, publishedSeq, replay.earlier);
    else if (ws.getBufferedAmount() < REPLAY_HIGH_WATER) this.#queuePage(ws, data, replay);
    return true;
  }

  /**
   * Joins the room's topic and says so with a heartbeat: its `last_seq` is a position the client can
   * resume from even when nothing of its room arrives for a long time (README, Live rooms).
   */
  #join(ws: WebSocket<SocketData>, data: SocketData, room: Room, afterSeq: number | undefined, publishedSeq: number, earlier: Sent): void {
    ws.subscribe(topicFor(data.orgId, room));
    // A replay from `afterSeq` sent everything up to `publishedSeq`; the topic goes on from there.
    data.state = { status: 'live', room, from: Math.min(afterSeq ?? publishedSeq, publishedSeq), earlier, late: new Set() };
    this.#sendHeartbeat(ws, publishedSeq);
  }

  /** Every update of the socket's room up to `lastSeq` has been sent before this heartbeat. */
  #sendHeartbeat(ws: WebSocket<SocketData>, lastSeq: number): void {
    sendCounted(ws, heartbeatFrame(this.#clock.now(), lastSeq, ws.getUserData().subscribeFrames));
  }

  /**
   * One heartbeat to every socket, closing slow and stalled consumers first (every HEARTBEAT_MS;
   * tests call it). A send costs a system call (~8 us here), so the sockets are taken
   * HEARTBEAT_SLICE at a time, one slice per event-loop turn: 20,000 sockets in one go held every
   * request for ~0.2 s. Within a slice, each org's position is read once (a quiet org's reads the
   * ledger) and each distinct frame is encoded once.
   */
  heartbeat(): void {
    this.#beatSlice([...this.#sockets], 0, this.#clock.now());
  }

  #beatSlice(sockets: readonly WebSocket<SocketData>[], from: number, at: number): void {
    const published = new Map<string, number>();
    const frames = new Map<string, Uint8Array>();
    const end = Math.min(sockets.length, from + HEARTBEAT_SLICE);
    for (let i = from; i < end; i++) {
      const ws = sockets[i]!;
      // Closed since the round began: a closed uWS socket must not be touched.
      if (!this.#sockets.has(ws)) continue;
      const buffered = ws.getBufferedAmount();
      if (buffered > MAX_BACKPRESSURE / 2) {
        ws.end(CLOSE_SLOW_CONSUMER, 'slow consumer');
        continue;
      }
      const data = ws.getUserData();
      if (data.reader.beat(buffered, data.state.status === 'replaying')) {
        ws.end(CLOSE_SLOW_CONSUMER, 'slow consumer: too little read for 30 s');
        continue;
      }
      let lastSeq = data.state.status === 'replaying' ? data.state.replay.cursor : published.get(data.orgId);
      if (lastSeq === undefined) {
        lastSeq = this.#publishedSeq(data.orgId);
        published.set(data.orgId, lastSeq);
      }
      const shape = `${lastSeq} ${data.subscribeFrames}`;
      let frame = frames.get(shape);
      if (frame === undefined) {
        frame = heartbeatFrame(at, lastSeq, data.subscribeFrames);
        frames.set(shape, frame);
      }
      sendCounted(ws, frame);
    }
    if (end < sockets.length) {
      setImmediate(() => {
        if (!this.#closed) this.#beatSlice(sockets, end, at);
      });
    }
  }
}

/** Sends a frame the rooms write to one socket themselves (not through a topic), counted for its reader (stalled-reader.ts). */
function sendCounted(ws: WebSocket<SocketData>, frame: Uint8Array): void {
  ws.getUserData().reader.sent(frame.byteLength);
  ws.send(frame, true);
}

/**
 * A heartbeat: every update of the socket's room up to `lastSeq` has been sent before it. For a
 * live socket that is the last seq fanned out; during a replay, only as far as the replay has got
 * (telling it more would let a client resume past updates it never received).
 */
const heartbeatFrame = (atMs: number, lastSeq: number, subscribeFrames: number): Uint8Array =>
  encodeLiveMessage({ heartbeat: { at_ms: atMs, last_seq: lastSeq, subscribe_frames: subscribeFrames } });

/** The room a socket is in or catching up on, if any. */
function roomOf(data: SocketData): Room | undefined {
  const { state } = data;
  return state.status === 'live' ? state.room : state.status === 'replaying' ? state.replay.room : undefined;
}
