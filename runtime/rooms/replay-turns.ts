// Live replays take turns. Each page of a replay reads up to REPLAY_PAGE_SIZE entries of an org's
// retained log on the event loop, and one org may hold thousands of sockets, each replaying (a
// Subscribe to one run from after_seq 0 reads the whole log to find that run's updates): read as
// they came, 300 of them held every request for seconds. Pages are queued per org here and run a
// few per event-loop turn, one org after another, so replays cost every turn a bounded amount of
// work and one org's replays wait behind each other, not in front of another org's. A turn ends
// after REPLAY_TURN_MS of work too: a page costs more with larger updates and sockets that do not
// read (measured: ~7 ms for 256 entries under 7,000 such sockets), and eight of them a turn made
// every other org's request wait ~60 ms behind one org's replays.

/** Pages of replays read per event-loop turn, across every org, at most. */
export const REPLAY_PAGES_PER_TURN = 8;

/** Work a turn does before it ends (at least one page): what a request waits at most behind replays, give or take a page. */
export const REPLAY_TURN_MS = 2;

export interface ReplayTurnsOptions {
  readonly pagesPerTurn?: number;
  readonly turnMs?: number;
  /** Milliseconds, for the turn's own time (default performance.now; tests give theirs). */
  readonly now?: () => number;
}

/** One page of a replay: answers whether it read the log (false: the replay had ended or was waiting). */
export type ReplayPage = () => boolean;

export class ReplayTurns {
  /** Pages waiting, per org, oldest first; orgs in the order they take their next turn. */
  readonly #waiting = new Map<string, ReplayPage[]>();
  readonly #pagesPerTurn: number;
  readonly #turnMs: number;
  readonly #now: () => number;
  #scheduled = false;

  constructor({ pagesPerTurn = REPLAY_PAGES_PER_TURN, turnMs = REPLAY_TURN_MS, now = () => performance.now() }: ReplayTurnsOptions = {}) {
    this.#pagesPerTurn = pagesPerTurn;
    this.#turnMs = turnMs;
    this.#now = now;
  }

  /** Pages waiting for a turn (tests watch it). */
  get waiting(): number {
    let count = 0;
    for (const pages of this.#waiting.values()) count += pages.length;
    return count;
  }

  /** Runs `page` in a later event-loop turn, after the org's pages queued before it. */
  add(orgId: string, page: ReplayPage): void {
    const pages = this.#waiting.get(orgId);
    if (pages === undefined) this.#waiting.set(orgId, [page]);
    else pages.push(page);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled || this.#waiting.size === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#turn();
    });
  }

  /** Runs pages of one org after another until #pagesPerTurn of them read the log, #turnMs passed, or none waits. */
  #turn(): void {
    let read = 0;
    const began = this.#now();
    try {
      while (read < this.#pagesPerTurn && this.#waiting.size > 0 && (read === 0 || this.#now() - began < this.#turnMs)) {
        const [orgId, pages] = this.#waiting.entries().next().value as [string, ReplayPage[]];
        const page = pages.shift() as ReplayPage;
        // The org's turn ends: it goes to the back of the line, behind every org waiting.
        this.#waiting.delete(orgId);
        if (pages.length > 0) this.#waiting.set(orgId, pages);
        if (page()) read++;
      }
    } finally {
      this.#schedule();
    }
  }
}
