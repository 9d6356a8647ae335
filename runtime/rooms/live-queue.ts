// The bytes live sockets hold queued in this process, unread by their clients: what uWS keeps for a
// socket once the kernel takes no more (its buffers full, the client not reading). Each socket is
// counted as of its last look (after a replay page, on drain, at each sweep) against a process total
// and a share per org. Replays send only into the room left below three quarters of both
// (live-room-entry.ts); a room's topic frames cannot wait, so a sweep each second counts every
// socket and, while an org holds more than its share (or all orgs more than the total), closes the
// sockets holding the most (4008, slow consumers) until that is no longer so. Without it 4,000
// sockets that never read, replaying a retained log, took the runtime past 1 GB.

import type { WebSocket } from 'uWebSockets.js';
import { TenantByteShares } from '../tenancy/tenant-byte-shares.ts';
import type { SocketData } from './live-socket.ts';

/** Bytes all live sockets may hold queued at once; one org's may hold a quarter. */
export const LIVE_QUEUE_BYTES = 256 * 1024 * 1024;
/** How often every socket is counted again, and the holders of an org past its share closed. */
export const LIVE_QUEUE_SWEEP_MS = 1000;
/** Sockets a sweep counts per event-loop turn. */
export const LIVE_QUEUE_SLICE = 1000;
/** Of the total and of each share, what replays may fill: the rest is kept for topic frames and heartbeats. */
const REPLAY_PART = 3 / 4;

export class LiveQueue {
  readonly #shares: TenantByteShares;
  readonly #forReplays: TenantByteShares;
  readonly #total: number;
  /** Orgs seen past their share (or the total) since the last closeLargestOverShare. */
  readonly #overOrgs = new Set<string>();

  constructor(total = LIVE_QUEUE_BYTES, perOrg = Math.floor(total / 4)) {
    this.#total = total;
    this.#shares = new TenantByteShares(total, perOrg);
    this.#forReplays = new TenantByteShares(Math.floor(total * REPLAY_PART), Math.floor(perOrg * REPLAY_PART));
  }

  /** Bytes counted now, over every socket. */
  get held(): number {
    return this.#shares.held;
  }

  /** Bytes a replay of `orgId` may still queue (none when 0 or less). */
  replayRoom(orgId: string): number {
    return this.#forReplays.room(orgId);
  }

  /** Counts what `ws` holds queued now in place of what it held at its last look. */
  count(ws: WebSocket<SocketData>): void {
    const data = ws.getUserData();
    this.#set(data, ws.getBufferedAmount());
  }

  /** Stops counting a socket (closed, or being closed). */
  forget(data: SocketData): void {
    this.#set(data, 0);
  }

  /**
   * Closes (with `close`) the sockets holding the most while their org holds more than its share,
   * or all orgs more than the total, as last counted; answers how many. Looks at the sockets only
   * when one of those is so.
   */
  closeLargestOverShare(sockets: Iterable<WebSocket<SocketData>>, close: (ws: WebSocket<SocketData>) => void): number {
    for (const orgId of this.#overOrgs) if (!this.#shares.over(orgId)) this.#overOrgs.delete(orgId);
    if (this.#overOrgs.size === 0 && this.#shares.held <= this.#total) return 0;
    const over = [...sockets].filter((ws) => this.#shares.over(ws.getUserData().orgId));
    over.sort((a, b) => b.getUserData().queued - a.getUserData().queued);
    let closed = 0;
    for (const ws of over) {
      const data = ws.getUserData();
      if (!this.#shares.over(data.orgId)) continue;
      this.forget(data);
      close(ws);
      closed++;
    }
    this.#overOrgs.clear();
    return closed;
  }

  #set(data: SocketData, bytes: number): void {
    this.#shares.give(data.orgId, data.queued);
    this.#forReplays.give(data.orgId, data.queued);
    this.#shares.hold(data.orgId, bytes);
    this.#forReplays.hold(data.orgId, bytes);
    data.queued = bytes;
    if (this.#shares.over(data.orgId)) this.#overOrgs.add(data.orgId);
  }
}
