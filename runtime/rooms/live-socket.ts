// What the live rooms keep per WebSocket: who opened it, where it stands (opening, replaying, live,
// closed), its Subscribe allowance, reader and queued bytes; and the frames the rooms send to one socket themselves.

import type { WebSocket } from 'uWebSockets.js';
import type { Principal } from '../auth/authorize.ts';
import type { TokenBucket } from '../token-bucket.ts';
import { encodeLiveMessage } from './live-codec.ts';
import type { Replay, Sent } from './live-replay.ts';
import type { Room, Subscription } from './live-subscription.ts';
import type { StalledReader } from './stalled-reader.ts';

/** Bytes a socket may have queued before it is treated as a slow consumer. */
export const MAX_BACKPRESSURE = 1024 * 1024;

/** A live socket's user data (uWS `getUserData`). */
export interface SocketData {
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
  /** Bytes it held queued at its last look, as counted in the process's live queue (live-queue.ts). */
  queued: number;
}

/**
 * `replaying`: catching up from the log, on no topic yet. `live`: on its room's topic, sent every
 * update of it after `from` (replayed, then live) besides what its earlier subscriptions were sent,
 * so a later Subscribe does not send any of it again. A replay whose socket is no longer
 * `replaying` that very replay stops at its next step.
 */
export type SocketState =
  | { readonly status: 'opening' }
  | { readonly status: 'replaying'; readonly replay: Replay }
  | {
      readonly status: 'live';
      readonly room: Room;
      readonly from: number;
      readonly earlier: Sent;
      /** Updates published late with a seq at or below `from` that its topic delivered (live-rooms.ts, #deliverLate). */
      readonly late: Set<number>;
    }
  | { readonly status: 'closed' };

/** Sends a frame the rooms write to one socket themselves (not through a topic), counted for its reader (stalled-reader.ts). */
export function sendCounted(ws: WebSocket<SocketData>, frame: Uint8Array): void {
  ws.getUserData().reader.sent(frame.byteLength);
  ws.send(frame, true);
}

/**
 * A heartbeat: every update of the socket's room up to `lastSeq` has been sent before it. For a
 * live socket that is the last seq fanned out; during a replay, only as far as the replay has got
 * (telling it more would let a client resume past updates it never received).
 */
export const heartbeatFrame = (atMs: number, lastSeq: number, subscribeFrames: number): Uint8Array =>
  encodeLiveMessage({ heartbeat: { at_ms: atMs, last_seq: lastSeq, subscribe_frames: subscribeFrames } });

/** The room a socket is in or catching up on, if any. */
export function roomOf(data: SocketData): Room | undefined {
  const { state } = data;
  return state.status === 'live' ? state.room : state.status === 'replaying' ? state.replay.room : undefined;
}
