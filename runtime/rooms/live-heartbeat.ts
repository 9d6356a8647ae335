// The live rooms' heartbeat round: every socket is told how far its room has been sent, slow and
// stalled consumers are closed first, and the sockets are taken a slice per event-loop turn.

import type { WebSocket } from 'uWebSockets.js';
import { CLOSE_SLOW_CONSUMER } from './live-close-codes.ts';
import { heartbeatFrame, MAX_BACKPRESSURE, sendCounted, type SocketData } from './live-socket.ts';

/** How often the rooms start a heartbeat round. */
export const HEARTBEAT_MS = 5000;
/** Sockets one event-loop turn of a heartbeat round sends to. */
const HEARTBEAT_SLICE = 1000;

/** What a heartbeat round reads of the rooms while it goes on across event-loop turns. */
export interface HeartbeatRound {
  /** The sockets open now: one closed since the round began is passed over. */
  readonly open: ReadonlySet<WebSocket<SocketData>>;
  /** The last seq of the org sent out to its sockets. */
  readonly publishedSeq: (orgId: string) => number;
  /** True once the rooms are closed: the round's remaining slices are dropped. */
  readonly stopped: () => boolean;
}

/**
 * One heartbeat to every open socket at `at`, closing slow and stalled consumers first. A send costs
 * a system call (~8 us here), so the sockets are taken HEARTBEAT_SLICE at a time, one slice per
 * event-loop turn: 20,000 sockets in one go held every request for ~0.2 s. Within a slice, each
 * org's position is read once (a quiet org's reads the ledger) and each distinct frame is encoded once.
 */
export function heartbeatRound(round: HeartbeatRound, at: number): void {
  beatSlice(round, [...round.open], 0, at);
}

function beatSlice(round: HeartbeatRound, sockets: readonly WebSocket<SocketData>[], from: number, at: number): void {
  const published = new Map<string, number>();
  const frames = new Map<string, Uint8Array>();
  const end = Math.min(sockets.length, from + HEARTBEAT_SLICE);
  for (let i = from; i < end; i++) {
    const ws = sockets[i]!;
    // Closed since the round began: a closed uWS socket must not be touched.
    if (!round.open.has(ws)) continue;
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
      lastSeq = round.publishedSeq(data.orgId);
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
      if (!round.stopped()) beatSlice(round, sockets, end, at);
    });
  }
}
