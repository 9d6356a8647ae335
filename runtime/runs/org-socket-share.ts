// Sockets one org may hold open to its receivers at once, busy or idle, over all of them. Each
// receiver origin has its own cap (--webhook-connections), and busy sockets are mostly bounded by
// the org's runs in flight; but a cancelled run's request stays out until its receiver answers or
// its timeout passes (the answer is kept as after_cancel), so an org cancelling runs that post to
// many origins (a wildcard DNS name gives any number) held ever more sockets, until the process ran
// out of file descriptors and every org's next connection failed (sluice_out_of_file_descriptors).
// Past its share, an org's next new connection waits for one of its own sockets to close. The
// process holds at most a total over every org too: thousands of orgs each within their share (a
// few runs in flight each) took it to its open-file limit the same way. Past the total, new
// connections wait, and the room each closed socket frees goes to the waiting org that has used the
// least socket time lately (org-socket-turns.ts; at equal use, the one holding fewer sockets, then
// the one served longest ago). Turns counted in sockets (a tier for orgs holding none, then each
// waiting org in turn) became a plain round of 3,000 busy orgs, each closing its one socket with
// requests waiting, and an org whose receiver answered at once got one request through per round.

import { openFileLimit, sharedFiles } from '../open-file-limit.ts';
import { OrgSocketTurns } from './org-socket-turns.ts';

/** Sockets one org may hold open to receivers at once, over all of them. */
export const OUTBOUND_SOCKETS_PER_ORG = 1024;

/** The total when the open-file limit cannot be read (not Linux) or is unlimited. */
export const OUTBOUND_SOCKETS_FALLBACK = 8192;

/**
 * Sockets to receivers the process holds at once, every org together: an eighth of the open-file
 * limit less what the process holds whatever its load (half of what the WebSockets leave of it,
 * websocket-budget.ts), at least 8; the rest is for HTTP connections and files.
 */
export function defaultOutboundSocketTotal(limit: number | undefined): number {
  return limit === undefined ? OUTBOUND_SOCKETS_FALLBACK : Math.max(8, Math.floor(sharedFiles(limit) / 8));
}

interface Waiting {
  /** False once the request was dropped (withdrawn, failed, the pools closed): it is skipped. */
  readonly wanted: () => boolean;
  readonly connect: () => void;
  readonly request: object;
}

export class OrgSocketShare {
  readonly #perOrg: number;
  /** Sockets the process may hold open, every org together. */
  readonly total: number;
  /** Sockets open per org, and the socket time each has used lately. */
  readonly #turns = new OrgSocketTurns();
  readonly #now: () => number;
  #openTotal = 0;
  /** Per org, requests waiting for room, oldest first; the map's order (an org given room goes last) breaks ties of turn. */
  readonly #waiting = new Map<string, Waiting[]>();
  /** Every waiting request, for isWaiting (asked of every request sent). */
  readonly #waitingRequests = new Set<object>();

  /** `now`: the monotonic clock socket time is counted on (ms). */
  constructor(perOrg = OUTBOUND_SOCKETS_PER_ORG, total = defaultOutboundSocketTotal(openFileLimit()), now: () => number = () => performance.now()) {
    this.#perOrg = perOrg;
    this.total = total;
    this.#now = now;
  }

  /** Whether `org` may open one more socket now: the process and the org both have room. */
  hasRoom(org: string): boolean {
    return this.#openTotal < this.total && this.#turns.open(org) < this.#perOrg;
  }

  /**
   * Whether the process holds its total while an org waits that has room of its own (a socket of
   * any org that falls idle closes for it); one waiting only for its own share is not helped so.
   */
  get full(): boolean {
    if (this.#openTotal < this.total) return false;
    for (const org of this.#waiting.keys()) if (this.#turns.open(org) < this.#perOrg) return true;
    return false;
  }

  /** `request` of `org` connects (`connect`) once the org has room, after those waiting before it. */
  wait(org: string, request: object, wanted: () => boolean, connect: () => void): void {
    const queue = this.#waiting.get(org);
    if (queue === undefined) this.#waiting.set(org, [{ request, wanted, connect }]);
    else queue.push({ request, wanted, connect });
    this.#waitingRequests.add(request);
  }

  /** Whether requests of `org` wait for room (a socket of its own that falls idle closes for them). */
  hasWaiting(org: string): boolean {
    return (this.#waiting.get(org)?.length ?? 0) > 0;
  }

  isWaiting(request: object): boolean {
    return this.#waitingRequests.has(request);
  }

  /** Requests waiting for room, over every org. */
  get waiting(): number {
    return this.#waitingRequests.size;
  }

  opened(org: string): void {
    this.#turns.opened(org, this.#now());
    this.#openTotal += 1;
  }

  /**
   * One of the org's sockets closed: while there is room, the oldest request still wanted of the
   * waiting org whose turn it is connects (#nextTurn). Each pass takes a request off a queue, so it ends.
   */
  closed(org: string): void {
    const now = this.#now();
    this.#turns.closed(org, now);
    this.#openTotal -= 1;
    if (!this.hasWaiting(org)) this.#turns.forgetIfIdle(org, now);
    while (this.#openTotal < this.total) {
      const waitingOrg = this.#nextTurn(now);
      if (waitingOrg === undefined) return;
      const next = this.#nextWanted(waitingOrg, this.#waiting.get(waitingOrg) as Waiting[]);
      next?.connect();
    }
  }

  /** The waiting org with room of its own that has used the least socket time lately; at equal use the one holding fewer sockets, then the first in the map. */
  #nextTurn(now: number): string | undefined {
    let best: string | undefined;
    let bestUsed = 0;
    let bestOpen = 0;
    for (const org of this.#waiting.keys()) {
      const open = this.#turns.open(org);
      if (open >= this.#perOrg) continue;
      const used = this.#turns.usedMs(org, now);
      if (best === undefined || used < bestUsed || (used === bestUsed && open < bestOpen)) {
        best = org;
        bestUsed = used;
        bestOpen = open;
      }
    }
    return best;
  }

  /** The org's oldest request still wanted, out of its queue (the org to the back of the turns), or undefined. */
  #nextWanted(org: string, queue: Waiting[]): Waiting | undefined {
    let next: Waiting | undefined;
    while (next === undefined && queue.length > 0) {
      const head = queue.shift() as Waiting;
      this.#waitingRequests.delete(head.request);
      if (head.wanted()) next = head;
    }
    this.#waiting.delete(org);
    if (queue.length > 0) this.#waiting.set(org, queue);
    else this.#noneWaitingOf(org);
    return next;
  }

  /** The org's queue is empty: it is forgotten if its use has decayed, and every idle org once no org waits. */
  #noneWaitingOf(org: string): void {
    this.#turns.forgetIfIdle(org, this.#now());
    if (this.#waiting.size === 0) this.#turns.forgetAllIdle();
  }

  /** Drops `request` from its org's queue, if it waits there (withdrawn: it will never connect). */
  forget(org: string, request: object): void {
    if (!this.#waitingRequests.delete(request)) return;
    const queue = this.#waiting.get(org) ?? [];
    const at = queue.findIndex((waiting) => waiting.request === request);
    if (at !== -1) queue.splice(at, 1);
    if (queue.length > 0) return;
    this.#waiting.delete(org);
    this.#noneWaitingOf(org);
  }

  /** Forgets every waiting request (the pools are closing: each is failed by its own shutdown). */
  clear(): void {
    this.#waiting.clear();
    this.#waitingRequests.clear();
    this.#turns.forgetAllIdle();
  }
}
