// How a live socket moves into a room: leaving its previous topic or replay, a replay from the
// retained log paced by the socket's queue and the orgs' turns, and joining the room's topic.

import type { WebSocket } from 'uWebSockets.js';
import type { Clock } from '../clock.ts';
import type { LiveQueue } from './live-queue.ts';
import { CLOSE_REPLAY_GONE, CLOSE_SANDBOX_RESET } from './live-close-codes.ts';
import { MAX_REMEMBERED_GAPS, nextPage, sentSoFar, sentWhileLive, startAtRetained, startReplay, type Replay, type Sent } from './live-replay.ts';
import { heartbeatFrame, MAX_BACKPRESSURE, sendCounted, type SocketData } from './live-socket.ts';
import { isRoomWithin, topicFor, type Room, type Subscription } from './live-subscription.ts';
import type { ReplayTurns } from './replay-turns.ts';
import type { SeqOrder } from './seq-order.ts';
import type { UpdateLog } from './update-log.ts';

/**
 * A replay sends its next page only while less than this is queued, and goes on when the socket
 * drains: a backlog of any size reaches a client that keeps reading, and stays clear of the 4008 check.
 */
export const REPLAY_HIGH_WATER = MAX_BACKPRESSURE / 4;

/** What moving sockets between rooms reads and drives; the rooms own each of them. */
export interface RoomEntryDeps {
  readonly log: UpdateLog;
  /** Emits updates to uWS in seq order; replays stop at its last emitted seq so nothing is sent twice. */
  readonly order: SeqOrder;
  /** Replays' pages, a few per event-loop turn, orgs in turn. */
  readonly turns: ReplayTurns;
  readonly clock: Clock;
  /** What every socket holds queued: a replay sends only into the room its org has left. */
  readonly queue: LiveQueue;
}

/** The last seq of the org sent out to its sockets; before any, the one below the first this process allocated. */
export function publishedSeqOf(deps: RoomEntryDeps, orgId: string): number {
  return deps.order.emitted(orgId) || deps.log.firstIssued(orgId) - 1;
}

/**
 * Moves the socket into a room. Without `afterSeq` it joins the room's topic at once; with it, it
 * leaves its topic and is replayed the retained updates after `afterSeq` (pumpReplay), leaving out
 * what it was already sent in its previous room or replay, and joins the topic once caught up.
 */
export function enterRoom(deps: RoomEntryDeps, ws: WebSocket<SocketData>, { room, afterSeq, strict }: Subscription): void {
  const data = ws.getUserData();
  // A position from before a sandbox reset: the client may show runs the reset removed, and a
  // replay would only leave their updates out. It reloads instead (after_seq 0 is refused only
  // when strict: otherwise it asks for whatever is retained).
  const resetSeq = room.environment === 'sandbox' && afterSeq !== undefined ? deps.log.resetSeq(data.orgId, 'sandbox') : 0;
  if (afterSeq !== undefined && resetSeq > 0 && afterSeq <= resetSeq && (afterSeq > 0 || strict)) {
    data.state = { status: 'closed' };
    ws.end(CLOSE_SANDBOX_RESET, `sandbox_reset: the sandbox was reset after seq ${afterSeq}; reload, then reconnect without after_seq`);
    return;
  }
  const publishedSeq = publishedSeqOf(deps, data.orgId);
  const earlier = leaveRoom(deps, ws, data, publishedSeq, afterSeq);
  // A frame sent while leaving can exceed the backpressure limit, which closes the socket.
  if (data.state.status === 'closed') return;
  if (afterSeq === undefined) {
    joinRoom(deps, ws, data, room, undefined, publishedSeq, earlier);
    return;
  }
  const replay = startReplay(room, afterSeq, earlier, strict);
  data.state = { status: 'replaying', replay };
  queueReplayPage(deps, ws, data, replay);
}

/**
 * Stops the socket's replay or leaves its topic; returns what it had been sent. `nextAfterSeq` is
 * where the socket's next subscription starts (undefined: live from now).
 */
function leaveRoom(deps: RoomEntryDeps, ws: WebSocket<SocketData>, data: SocketData, publishedSeq: number, nextAfterSeq: number | undefined): Sent {
  const { state } = data;
  if (state.status !== 'live' && state.status !== 'replaying') return [];
  // The boundary: frames before this heartbeat belong to the earlier subscription, and it carries
  // the new Subscribe's count. Its position is one the new subscription holds too: a replay from
  // after_seq follows it. uWS holds each subscriber's topic messages until the end of the loop
  // turn and drops the ones still held when it unsubscribes; this send delivers them first.
  sendHeartbeat(deps, ws, Math.min(publishedSeq, nextAfterSeq ?? publishedSeq));
  if (state.status === 'replaying') return sentSoFar(state.replay);
  if (data.state.status !== 'live') return [];
  ws.unsubscribe(topicFor(data.orgId, state.room));
  // The topic delivered everything fanned out until now, and nothing more; not a gap skipped
  // meanwhile that may still arrive late (it was not sent, and the replay must send it).
  return sentWhileLive(state.earlier, state.room, state.from, publishedSeq, deps.order.skippedBetween(data.orgId, state.from, publishedSeq), state.late);
}

/** Queues the replay's next page for its org's turn (replay-turns.ts), unless one is queued already. */
export function queueReplayPage(deps: RoomEntryDeps, ws: WebSocket<SocketData>, data: SocketData, replay: Replay): void {
  if (replay.scheduled) return;
  replay.scheduled = true;
  deps.turns.add(data.orgId, () => {
    replay.scheduled = false;
    return pumpReplay(deps, ws, data, replay);
  });
}

/**
 * Sends the replay's next page while less than REPLAY_HIGH_WATER is queued, then queues the next,
 * or waits for `drain` once the queue is that long. The last page (reaching the last seq fanned
 * out) is read, sent and followed by joining the topic in this one synchronous call: no publish
 * falls in between, so live updates begin right after the replay's last seq, each exactly once.
 * Answers whether it read the log.
 */
function pumpReplay(deps: RoomEntryDeps, ws: WebSocket<SocketData>, data: SocketData, replay: Replay): boolean {
  // Closed, or a later Subscribe replaced this replay: `ws` must not be touched once closed.
  if (data.state.status !== 'replaying' || data.state.replay !== replay) return false;
  // Past its org's room in the live queue it waits for the queue's next sweep (live-rooms.ts).
  const budget = Math.min(REPLAY_HIGH_WATER - ws.getBufferedAmount(), deps.queue.replayRoom(data.orgId));
  if (budget <= 0) return false;
  // after_seq 0 asks for whatever is retained (unless strict): it starts there. Any other position
  // must still be in the log, unless the socket was already sent that stretch (a Subscribe on a
  // socket that was live).
  const oldest = deps.log.oldestRetained(data.orgId);
  startAtRetained(replay, oldest);
  const coveredEarlier = replay.earlier.some((sent) => isRoomWithin(replay.room, sent.room) && sent.after <= replay.cursor && sent.upTo >= oldest - 1);
  if (replay.cursor + 1 < oldest && !coveredEarlier) {
    data.state = { status: 'closed' };
    ws.end(CLOSE_REPLAY_GONE, `replay_gone: updates after seq ${replay.cursor} are no longer retained (oldest: ${oldest})`);
    return false;
  }
  const publishedSeq = publishedSeqOf(deps, data.orgId);
  // A position past every update sent out cannot come from this log (its data dir was replaced,
  // or the position from another org): following it would skip every update up to it, silently.
  if (replay.after > publishedSeq) {
    data.state = { status: 'closed' };
    ws.end(CLOSE_REPLAY_GONE, `replay_gone: after_seq ${replay.after} is past the last update sent (seq ${publishedSeq}); reload and subscribe live`);
    return false;
  }
  const skipped = { isSkipped: (seq: number) => deps.order.isSkipped(data.orgId, seq), between: (after: number, upTo: number) => deps.order.skippedBetween(data.orgId, after, upTo) };
  const page = nextPage(deps.log, data.orgId, replay, publishedSeq, budget, skipped);
  if (page.frames.length > 0 || page.gapsFull === true) {
    ws.cork(() => {
      for (const frame of page.frames) sendCounted(ws, frame);
    });
    // A frame over the backpressure limit closes the socket (closeOnBackpressureLimit).
    if (data.state.status !== 'replaying') return true;
    deps.queue.count(ws);
    if (page.gapsFull === true) {
      data.state = { status: 'closed' };
      ws.end(CLOSE_REPLAY_GONE, `replay_gone: more than ${MAX_REMEMBERED_GAPS} updates of this replay are not on disk yet (failed writes); reload, then reconnect`);
      return false;
    }
  }
  if (page.caughtUp) joinRoom(deps, ws, data, replay.room, replay.start, publishedSeq, replay.earlier, replay.late);
  else if (ws.getBufferedAmount() < REPLAY_HIGH_WATER) queueReplayPage(deps, ws, data, replay);
  return true;
}

/**
 * Joins the room's topic and says so with a heartbeat: its `last_seq` is a position the client can
 * resume from even when nothing of its room arrives for a long time (README, Live rooms).
 */
function joinRoom(deps: RoomEntryDeps, ws: WebSocket<SocketData>, data: SocketData, room: Room, afterSeq: number | undefined, publishedSeq: number, earlier: Sent, lateSent: ReadonlySet<number> = new Set()): void {
  ws.subscribe(topicFor(data.orgId, room));
  // A replay from `afterSeq` sent everything up to `publishedSeq` (and the late updates below
  // `afterSeq` that came during it, `lateSent`); the topic goes on from there.
  data.state = { status: 'live', room, from: Math.min(afterSeq ?? publishedSeq, publishedSeq), earlier, late: new Set(lateSent) };
  sendHeartbeat(deps, ws, publishedSeq);
}

/** Every update of the socket's room up to `lastSeq` has been sent before this heartbeat. */
function sendHeartbeat(deps: RoomEntryDeps, ws: WebSocket<SocketData>, lastSeq: number): void {
  sendCounted(ws, heartbeatFrame(deps.clock.now(), lastSeq, ws.getUserData().subscribeFrames));
}
