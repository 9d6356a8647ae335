// The bytes live sockets hold queued in this process, unread by their clients: what uWS keeps for a
// socket once the kernel takes no more (its buffers full, the client not reading). Each socket is
// counted as of its last look (after a replay page, on drain, at each sweep), per org and in all.
// An org's replays send only while its sockets hold less than three quarters of its share
// (live-room-entry.ts). A room's topic frames cannot wait, so a sweep each second counts every
// socket, closes the sockets holding the most of an org past its share, and, while all orgs hold
// more than the total, the largest socket of the org holding the most, until neither is so (4008,
// slow consumers): orgs that hold little are never closed for the total, so no number of orgs
// filling their shares holds up another's replays. Without it 4,000 sockets that never read,
// replaying a retained log, took the runtime past 1 GB.

import type { WebSocket } from 'uWebSockets.js';
import { KeyedCounts } from '../../actors/keyed-counts.ts';
import type { SocketData } from './live-socket.ts';

/** Bytes all live sockets may hold queued at once; one org's may hold a quarter. */
export const LIVE_QUEUE_BYTES = 256 * 1024 * 1024;
/** How often every socket is counted again, and the largest holders past a share or the total closed. */
export const LIVE_QUEUE_SWEEP_MS = 1000;
/** Sockets a sweep counts per event-loop turn. */
export const LIVE_QUEUE_SLICE = 1000;
/** Of an org's share, what its replays may fill: the rest is kept for topic frames and heartbeats. */
const REPLAY_PART = 3 / 4;

type LiveSocket = WebSocket<SocketData>;

export class LiveQueue {
  readonly #total: number;
  readonly #perOrg: number;
  #held = 0;
  readonly #heldBy = new KeyedCounts();

  constructor(total = LIVE_QUEUE_BYTES, perOrg = Math.floor(total / 4)) {
    this.#total = total;
    this.#perOrg = perOrg;
  }

  /** Bytes counted now, over every socket. */
  get held(): number {
    return this.#held;
  }

  /** Bytes a replay of `orgId` may still queue (none when 0 or less). */
  replayRoom(orgId: string): number {
    return Math.floor(this.#perOrg * REPLAY_PART) - this.#heldBy.get(orgId);
  }

  /** Counts what `ws` holds queued now in place of what it held at its last look. */
  count(ws: LiveSocket): void {
    this.#set(ws.getUserData(), ws.getBufferedAmount());
  }

  /** Stops counting a socket (closed, or being closed). */
  forget(data: SocketData): void {
    this.#set(data, 0);
  }

  /**
   * Closes (with `close`) the sockets holding the most of each org past its share until it is within
   * it, then, while all hold more than the total, the largest of the org holding the most; as last
   * counted. Answers how many it closed.
   */
  closeLargestOverShare(sockets: Iterable<LiveSocket>, close: (ws: LiveSocket) => void): number {
    const overShare = (orgId: string): boolean => this.#heldBy.get(orgId) > this.#perOrg;
    const byOrg = new Map<string, LiveSocket[]>();
    for (const ws of sockets) {
      const { orgId, queued } = ws.getUserData();
      if (queued === 0 || !(this.#held > this.#total || overShare(orgId))) continue;
      const held = byOrg.get(orgId);
      if (held === undefined) byOrg.set(orgId, [ws]);
      else held.push(ws);
    }
    if (byOrg.size === 0) return 0;
    // Largest last, so each org's next to close is pop().
    for (const held of byOrg.values()) held.sort((a, b) => a.getUserData().queued - b.getUserData().queued);
    let closed = 0;
    const closeLargestOf = (orgId: string): boolean => {
      const ws = byOrg.get(orgId)?.pop();
      if (ws === undefined) return false;
      this.forget(ws.getUserData());
      close(ws);
      closed++;
      return true;
    };
    for (const orgId of byOrg.keys()) while (overShare(orgId) && closeLargestOf(orgId));
    while (this.#held > this.#total) {
      let top: string | undefined;
      for (const orgId of byOrg.keys()) if (top === undefined || this.#heldBy.get(orgId) > this.#heldBy.get(top)) top = orgId;
      if (top === undefined || !closeLargestOf(top)) byOrg.delete(top ?? '');
      if (byOrg.size === 0) break;
    }
    return closed;
  }

  #set(data: SocketData, bytes: number): void {
    this.#held += bytes - data.queued;
    this.#heldBy.subtract(data.orgId, data.queued);
    // Never a count of 0: KeyedCounts forgets an org only when a subtraction brings it there.
    if (bytes > 0) this.#heldBy.add(data.orgId, bytes);
    data.queued = bytes;
  }
}
