// Sockets one org may hold open to its receivers at once, busy or idle, over all of them. Each
// receiver origin has its own cap (--webhook-connections), and busy sockets are mostly bounded by
// the org's runs in flight; but a cancelled run's request stays out until its receiver answers or
// its timeout passes (the answer is kept as after_cancel), so an org cancelling runs that post to
// many origins (a wildcard DNS name gives any number) held ever more sockets, until the process ran
// out of file descriptors and every org's next connection failed (sluice_out_of_file_descriptors).
// Past its share, an org's next new connection waits for one of its own sockets to close. The
// process holds at most a total over every org too: thousands of orgs each within their share (a
// few runs in flight each) took it to its open-file limit the same way. Past the total, new
// connections wait, and the room each closed socket frees goes first to waiting orgs that hold no
// socket, then to the others in turn: with 3,000 orgs waiting, an org sending now and then waited a
// whole round (10-19 s) for its first connection behind orgs that each held some. Still a round
// when thousands of busy orgs each hold a single socket: each closes with requests waiting (none is
// kept idle then) and puts its org in the first tier too (a probe of 2026-12-06, README Limits).
// Turns by socket time were tried twice on 2026-12-06 and reverted after review (commits 96bb80c,
// 0addd57): least use with idle orgs forgotten let orgs sending one request at a time pass an org
// with a backlog forever; use halving every minute kept counting while nothing waited, so an
// org that had filled its share got nothing for ~10 minutes once others came; both scanned every
// waiting org at each close (0.5 ms at 3,000). A fix must count use only while orgs wait, bound
// what a newcomer may take ahead, keep memory to the orgs holding or wanting sockets, and pick in
// O(log n) (test/runs/org-socket-fairness.test.ts keeps the first failure's load as a guard).

import { KeyedCounts } from '../../actors/keyed-counts.ts';
import { openFileLimit, sharedFiles } from '../open-file-limit.ts';

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
  readonly #open = new KeyedCounts();
  #openTotal = 0;
  /** Per org, requests waiting for room, oldest first; the map's order is the orgs' turns for room that frees. */
  readonly #waiting = new Map<string, Waiting[]>();
  /** Every waiting request, for isWaiting (asked of every request sent). */
  readonly #waitingRequests = new Set<object>();
  /** The waiting orgs that hold no socket, in the order they came to: served before any other. */
  readonly #holdingNone = new Set<string>();

  constructor(perOrg = OUTBOUND_SOCKETS_PER_ORG, total = defaultOutboundSocketTotal(openFileLimit())) {
    this.#perOrg = perOrg;
    this.total = total;
  }

  /** Whether `org` may open one more socket now: the process and the org both have room. */
  hasRoom(org: string): boolean {
    return this.#openTotal < this.total && this.#open.get(org) < this.#perOrg;
  }

  /**
   * Whether the process holds its total while an org waits that has room of its own (a socket of
   * any org that falls idle closes for it); one waiting only for its own share is not helped so.
   */
  get full(): boolean {
    if (this.#openTotal < this.total) return false;
    for (const org of this.#waiting.keys()) if (this.#open.get(org) < this.#perOrg) return true;
    return false;
  }

  /** `request` of `org` connects (`connect`) once the org has room, after those waiting before it. */
  wait(org: string, request: object, wanted: () => boolean, connect: () => void): void {
    const queue = this.#waiting.get(org);
    if (queue === undefined) this.#waiting.set(org, [{ request, wanted, connect }]);
    else queue.push({ request, wanted, connect });
    this.#waitingRequests.add(request);
    if (this.#open.get(org) === 0) this.#holdingNone.add(org);
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
    this.#open.add(org);
    this.#openTotal += 1;
    this.#holdingNone.delete(org);
  }

  /**
   * One of the org's sockets closed: while there is room, the oldest request still wanted of each
   * waiting org that holds no socket connects, then the other waiting orgs take turns; an org
   * served goes to the back of the turns.
   */
  closed(org: string): void {
    this.#open.subtract(org);
    this.#openTotal -= 1;
    if (this.#open.get(org) === 0 && this.hasWaiting(org)) this.#holdingNone.add(org);
    for (const waitingOrg of [...this.#holdingNone]) {
      if (this.#openTotal >= this.total) return;
      // Out of the tier whether or not its request opens a socket (a free one of its origin may take it).
      this.#holdingNone.delete(waitingOrg);
      const queue = this.#waiting.get(waitingOrg);
      const next = queue === undefined ? undefined : this.#nextWanted(waitingOrg, queue);
      next?.connect();
    }
    let served = true;
    while (served && this.#openTotal < this.total) {
      served = false;
      for (const [waitingOrg, queue] of [...this.#waiting]) {
        if (this.#openTotal >= this.total) return;
        if (!this.hasRoom(waitingOrg)) continue;
        const next = this.#nextWanted(waitingOrg, queue);
        if (next === undefined) continue;
        served = true;
        next.connect();
      }
    }
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
    else this.#holdingNone.delete(org);
    return next;
  }

  /** Drops `request` from its org's queue, if it waits there (withdrawn: it will never connect). */
  forget(org: string, request: object): void {
    if (!this.#waitingRequests.delete(request)) return;
    const queue = this.#waiting.get(org) ?? [];
    const at = queue.findIndex((waiting) => waiting.request === request);
    if (at !== -1) queue.splice(at, 1);
    if (queue.length > 0) return;
    this.#waiting.delete(org);
    this.#holdingNone.delete(org);
  }

  /** Forgets every waiting request (the pools are closing: each is failed by its own shutdown). */
  clear(): void {
    this.#waiting.clear();
    this.#waitingRequests.clear();
    this.#holdingNone.clear();
  }
}
