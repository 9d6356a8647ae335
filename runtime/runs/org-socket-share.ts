// Sockets one org may hold open to its receivers at once, busy or idle, over all of them. Each
// receiver origin has its own cap (--webhook-connections), and busy sockets are mostly bounded by
// the org's runs in flight; but a cancelled run's request stays out until its receiver answers or
// its timeout passes (the answer is kept as after_cancel), so an org cancelling runs that post to
// many origins (a wildcard DNS name gives any number) held ever more sockets, until the process ran
// out of file descriptors and every org's next connection failed (sluice_out_of_file_descriptors).
// Past its share, an org's next new connection waits for one of its own sockets to close. The
// process holds at most a total over every org too: thousands of orgs each within their share (a
// few runs in flight each) took it to its open-file limit the same way. Past the total, new
// connections wait. The room each closed socket frees went first to waiting orgs holding no socket,
// then to the others in turn, one socket each; but busy orgs close their one socket with requests
// waiting too, so at 3,000 slow orgs it was a plain round, and an org whose receiver answered at
// once got one request through per round, 20 s apart (a probe of 2026-12-06). Now it goes by fair
// queuing over socket time (org-socket-turns.ts; at an equal turn, the org holding fewer sockets,
// then the one placed first), each waiting org placed in a heap when it starts waiting and at each
// change of its own: O(log n) a socket. Two earlier tries were reverted after review (96bb80c,
// 0addd57): least use with idle orgs forgotten let orgs sending one request at a time pass an org
// with a backlog forever; use halving every minute kept counting while nothing waited, so an org
// that had filled its share got nothing for ~10 minutes once others came; both scanned every
// waiting org per socket. test/runs/org-socket-fairness.test.ts simulates those loads.

import { MinHeap } from '../../actors/min-heap.ts';
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

/** A waiting org's place in the turns, as of its last change: stale once its org was placed again, or stopped waiting (#turnSeqs). */
interface Turn {
  readonly org: string;
  /** Where its next request would finish (OrgSocketTurns.nextFinishOf), when this entry was made. */
  readonly finish: number;
  /** Sockets it held then: fewer goes first at an equal finish. */
  readonly open: number;
  /** When it was made, never used twice: earlier goes first at an equal finish and sockets held. */
  readonly seq: number;
}

const turnBefore = (a: Turn, b: Turn): boolean => a.finish < b.finish || (a.finish === b.finish && (a.open < b.open || (a.open === b.open && a.seq < b.seq)));

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
  /** Sockets open per org, and whose turn it is. */
  readonly #turns = new OrgSocketTurns();
  readonly #now: () => number;
  #openTotal = 0;
  /** When orgs began to wait (the waiting map was empty until then). */
  #waitingSince = 0;
  /** Per org, requests waiting for room, oldest first. */
  readonly #waiting = new Map<string, Waiting[]>();
  /** The waiting orgs' turns; each org's latest entry (its seq in #turnSeqs) counts, older ones are skipped. */
  readonly #turnHeap = new MinHeap<Turn>(turnBefore);
  /** Per waiting org, the seq of its latest entry: an entry from an earlier wait never counts again. */
  readonly #turnSeqs = new Map<string, number>();
  #turnSeq = 0;
  /** Every waiting request, for isWaiting (asked of every request sent). */
  readonly #waitingRequests = new Set<object>();

  /** `now`: the monotonic clock sockets' lives are measured on (ms). */
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
    if (this.#waiting.size === 0) this.#waitingSince = this.#now();
    const queue = this.#waiting.get(org);
    this.#waitingRequests.add(request);
    if (queue !== undefined) return void queue.push({ request, wanted, connect });
    this.#waiting.set(org, [{ request, wanted, connect }]);
    this.#placeTurn(org);
  }

  /** Whether requests of `org` wait for room (a socket of its own that falls idle closes for them). */
  hasWaiting(org: string): boolean {
    return (this.#waiting.get(org)?.length ?? 0) > 0;
  }

  isWaiting(request: object): boolean {
    return this.#waitingRequests.has(request);
  }

  /** Orgs whose turns are kept: those holding sockets or waiting, and idle ones the virtual clock has not passed. */
  get trackedOrgs(): number {
    return this.#turns.size;
  }

  /** Requests waiting for room, over every org. */
  get waiting(): number {
    return this.#waitingRequests.size;
  }

  /** A socket of `org` opened: returns when (on the share's clock), for closed() to tell its life. */
  opened(org: string): number {
    this.#turns.opened(org);
    this.#openTotal += 1;
    if (this.hasWaiting(org)) this.#placeTurn(org);
    return this.#now();
  }

  /**
   * One of the org's sockets closed (opened at `openedAt`, what opened() returned, when known):
   * while there is room, the oldest request still wanted of the waiting org whose turn it is
   * connects (#nextTurn). Each pass takes a request off a queue, so it ends.
   */
  closed(org: string, openedAt?: number): void {
    // Charged only while orgs wait, and only since they began to.
    const now = this.#now();
    const charged = openedAt === undefined || this.#waiting.size === 0 ? undefined : Math.max(0, now - Math.max(openedAt, this.#waitingSince));
    this.#turns.closed(org, charged);
    this.#openTotal -= 1;
    if (this.hasWaiting(org)) this.#placeTurn(org);
    else this.#turns.forgetIfIdle(org);
    while (this.#openTotal < this.total) {
      const waitingOrg = this.#nextTurn();
      if (waitingOrg === undefined) return;
      const next = this.#nextWanted(waitingOrg, this.#waiting.get(waitingOrg) as Waiting[]);
      if (next === undefined) continue;
      if (this.hasWaiting(waitingOrg)) this.#placeTurn(waitingOrg);
      this.#turns.sweepIdle((idle) => this.hasWaiting(idle));
      next.connect();
    }
  }

  /**
   * The waiting org with room of its own whose next request would finish first (OrgSocketTurns),
   * as of its last change (an org's place is taken when it starts waiting and again at each change
   * of its own: a socket opened or closed, room given; the virtual clock moving on leaves it, so an
   * org that has waited longer keeps the earlier place). One at its share is left out until one of
   * its sockets closes, which places it again.
   */
  #nextTurn(): string | undefined {
    for (let turn = this.#turnHeap.pop(); turn !== undefined; turn = this.#turnHeap.pop()) {
      if (this.#isLatest(turn) && this.#turns.open(turn.org) < this.#perOrg) return turn.org;
    }
    return undefined;
  }

  /** Whether `turn` is its org's latest entry, the org still waiting (#noneWaitingOf drops its seq). */
  #isLatest(turn: Turn): boolean {
    return this.#turnSeqs.get(turn.org) === turn.seq;
  }

  /** Places the waiting `org` in the turns as it stands now (its earlier entry goes stale). */
  #placeTurn(org: string): void {
    this.#turnSeq += 1;
    this.#turnSeqs.set(org, this.#turnSeq);
    this.#turnHeap.push({ org, finish: this.#turns.nextFinishOf(org), open: this.#turns.open(org), seq: this.#turnSeq });
    // Stale entries (orgs placed again, or no longer waiting) are dropped once they outnumber live ones.
    if (this.#turnHeap.size > 1024 && this.#turnHeap.size > 2 * this.#waiting.size) this.#turnHeap.rebuild((turn) => this.#isLatest(turn));
  }

  /** The org's oldest request still wanted, out of its queue (the org to the back of the turns), or undefined. */
  #nextWanted(org: string, queue: Waiting[]): Waiting | undefined {
    let next: Waiting | undefined;
    while (next === undefined && queue.length > 0) {
      const head = queue.shift() as Waiting;
      this.#waitingRequests.delete(head.request);
      if (head.wanted()) next = head;
    }
    if (next !== undefined) this.#turns.given(org);
    this.#waiting.delete(org);
    if (queue.length > 0) this.#waiting.set(org, queue);
    // One given room keeps its turn (its usual hold): it is about to open a socket.
    else this.#noneWaitingOf(org, next !== undefined);
    return next;
  }

  /** The org's queue is empty: unless `served`, it is forgotten if idle; every idle org (but a served one) once no org waits. */
  #noneWaitingOf(org: string, served = false): void {
    this.#turnSeqs.delete(org);
    if (!served) this.#turns.forgetIfIdle(org);
    if (this.#waiting.size === 0) this.#turns.forgetAllIdle(served ? org : undefined);
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
    this.#turnSeqs.clear();
    this.#turnHeap.clear();
    this.#turns.forgetAllIdle();
  }
}
