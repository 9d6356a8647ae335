// Idle keep-alive sockets per org, over all its receivers. Each receiver origin keeps its own
// (at most --webhook-connections), and an org whose steps post to many names (a wildcard DNS name
// gives any number of origins) kept one idle socket per origin for 4 s after each request: thousands,
// enough to take the process to its file-descriptor limit, when every org's next connection fails
// (sluice_out_of_file_descriptors). Past its share an org's finished socket closes instead of
// waiting for reuse, which costs it a new connection, nobody else anything.
// An idle socket that receives a byte is closed at once: no request asked for it (HTTP/1.1 answers
// only requests), and Node's idle timeout restarts with every byte, so a receiver writing on it
// kept it open for good, read and thrown away on the event loop (a fast one at every org's cost),
// and the next request on it would take the junk for its answer.

import { KeyedCounts } from '../../actors/keyed-counts.ts';

/** What is asked of a socket kept idle: to hear its bytes, and to be closed. */
export interface IdleSocket {
  on(event: 'data', listener: () => void): unknown;
  off(event: 'data', listener: () => void): unknown;
  destroy(): void;
}

/** Idle sockets one org may keep open, over all its receivers (busy ones are bounded by its runs in flight). */
export const IDLE_SOCKETS_PER_ORG = 256;

export class OrgIdleSockets {
  readonly #perOrg: number;
  readonly #held = new KeyedCounts();
  /** Idle sockets, each with its org and what closes it on an unasked byte, until reused or closed. */
  readonly #idle = new Map<object, { readonly org: string; readonly onData: () => void }>();

  constructor(perOrg = IDLE_SOCKETS_PER_ORG) {
    this.#perOrg = perOrg;
  }

  /** Whether `org` may keep one more socket idle. */
  hasRoom(org: string): boolean {
    return this.#held.get(org) < this.#perOrg;
  }

  /** `socket` of `org` waits for reuse from now on, until `taken`. */
  kept(socket: IdleSocket, org: string): void {
    if (this.#idle.has(socket)) return;
    const onData = (): void => {
      this.taken(socket);
      socket.destroy();
    };
    socket.on('data', onData);
    this.#idle.set(socket, { org, onData });
    this.#held.add(org);
  }

  /**
   * Closes one of the org's idle sockets (to make room for a new connection of its own), or with
   * no org given one of any org's (the process holds its total of sockets); false when there is none.
   */
  closeOne(org?: string): boolean {
    for (const [socket, { org: owner }] of this.#idle) {
      if (org !== undefined && owner !== org) continue;
      // Taken first: its close comes later, and the next call must close another.
      this.taken(socket);
      (socket as IdleSocket).destroy();
      return true;
    }
    return false;
  }

  /** `socket` is idle no more: reused by a request, or closed. */
  taken(socket: object): void {
    const idle = this.#idle.get(socket);
    if (idle === undefined) return;
    this.#idle.delete(socket);
    (socket as IdleSocket).off('data', idle.onData);
    this.#held.subtract(idle.org);
  }
}
