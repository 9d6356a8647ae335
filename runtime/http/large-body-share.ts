// How much of the event loop one org's large request bodies may take. A handler reads its body
// there (JSON, a multipart upload) before it can judge it: a 1 MiB body of tiny values took
// ~0.1-0.2 s to parse and refuse, and an org sending such bodies on a few connections held every
// other org's requests for up to a second (found by a probe), while a 1 MiB body of JSON Schemas
// parses in a few ms. So what is counted is time: the event-loop time of each handler given a body
// of LARGE_BODY_BYTES or more (its part before its first await, where handlers read their body),
// but of routes that read such bodies in a thread of their own. An org's large bodies are read one
// at a time, in the order they came, a turn of the loop apart, against a token bucket of loop time
// (token-bucket.ts): LARGE_BODY_SHARE of each second, up to LARGE_BODY_BURST_MS held. A read is
// counted once done, on credit: one that overdraws it makes the org's next wait until it is paid
// back, and one that would wait past LARGE_BODY_MAX_WAIT_MS is refused with 429 instead. The bucket
// is kept on a clock that never runs backwards (performance.now).

import { SluiceError } from '../errors.ts';
import { TokenBucket } from '../token-bucket.ts';

/** Bodies this large or larger are held to the share (and read in a thread by the routes that can). */
export const LARGE_BODY_BYTES = 64 * 1024;
/** The part of the event loop one org's large bodies may take over time. */
export const LARGE_BODY_SHARE = 0.1;
/** What they may take at once after a quiet while (ms of the event loop), before the read that overdraws it. */
export const LARGE_BODY_BURST_MS = 30;
/** The longest a large body waits its turn; one that would wait longer is refused (429). */
export const LARGE_BODY_MAX_WAIT_MS = 5000;

/** 429 `large_bodies_too_fast`: the org's large bodies took its share of the event loop; this one would wait past LARGE_BODY_MAX_WAIT_MS. */
export class LargeBodiesTooFastError extends SluiceError {
  constructor(readonly retryAfterMs: number) {
    super(429, 'large_bodies_too_fast', `This organization's large request bodies (${LARGE_BODY_BYTES / 1024} KiB or more) took its share of the server's time to read; send this one again in ${Math.max(1, Math.ceil(retryAfterMs / 1000))} s.`);
  }
}

/** Whether `bucket` (of `capacity`) is full again: nothing of the org's reads is left to pay back. */
const isFull = (bucket: TokenBucket, now: number, capacity: number): boolean => bucket.waitFor(now, capacity) === 0;

/** Past this many orgs kept, those paid off are forgotten (an org is also forgotten when its last body was read and paid off). */
const SWEEP_AT = 1024;

interface Waiter {
  readonly deadline: number;
  readonly go: () => void;
  readonly refuse: (error: Error) => void;
}

interface OrgTurns {
  /** The org's loop time (ms) to read with: taken on credit as reads are done. */
  readonly bucket: TokenBucket;
  /** A body of it is being read (given its turn, not yet done). */
  reading: boolean;
  readonly waiting: Waiter[];
  timer: NodeJS.Timeout | undefined;
}

export interface LargeBodyShareOptions {
  readonly share?: number;
  readonly burstMs?: number;
  readonly maxWaitMs?: number;
  /** The clock the share is kept on (ms, never backwards). */
  readonly now?: () => number;
}

export class LargeBodyShare {
  readonly #perSecondMs: number;
  readonly #burstMs: number;
  readonly #maxWaitMs: number;
  readonly #now: () => number;
  readonly #orgs = new Map<string, OrgTurns>();

  constructor({ share = LARGE_BODY_SHARE, burstMs = LARGE_BODY_BURST_MS, maxWaitMs = LARGE_BODY_MAX_WAIT_MS, now = () => performance.now() }: LargeBodyShareOptions = {}) {
    this.#perSecondMs = share * 1000;
    this.#burstMs = burstMs;
    this.#maxWaitMs = maxWaitMs;
    this.#now = now;
  }

  /**
   * Resolves when a large body of `org` may be read (on a later turn of the event loop); the caller
   * then reads it and tells done() how long that took. Rejects with the 429 when its wait would
   * pass the longest one. `cutOff` is handed the function that withdraws it with an error (a stop).
   */
  turn(org: string, cutOff?: (cut: (error: Error) => void) => void): Promise<void> {
    const turns = this.#turnsOf(org);
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { deadline: this.#now() + this.#maxWaitMs, go: resolve, refuse: reject };
      turns.waiting.push(waiter);
      cutOff?.((error) => {
        const at = turns.waiting.indexOf(waiter);
        if (at === -1) return;
        turns.waiting.splice(at, 1);
        reject(error);
        this.#next(org, turns);
      });
      this.#next(org, turns);
    });
  }

  /** The body given its turn was read, taking `ms` of the event loop: the org's next may go. */
  done(org: string, ms: number): void {
    const turns = this.#turnsOf(org);
    turns.bucket.takeOnCredit(this.#now(), ms, Number.POSITIVE_INFINITY);
    turns.reading = false;
    this.#next(org, turns);
  }

  /** Orgs with a body waiting, being read, or their bucket not yet full again (for a test to see them forgotten). */
  get trackedOrgs(): number {
    return this.#orgs.size;
  }

  #turnsOf(org: string): OrgTurns {
    let turns = this.#orgs.get(org);
    if (turns === undefined) {
      if (this.#orgs.size >= SWEEP_AT) this.#forgetPaidOff();
      turns = { bucket: new TokenBucket(this.#burstMs, this.#perSecondMs, this.#now()), reading: false, waiting: [], timer: undefined };
      this.#orgs.set(org, turns);
    }
    return turns;
  }

  /** Forgets the orgs with nothing waiting or being read, and their bucket full again. */
  #forgetPaidOff(): void {
    const now = this.#now();
    for (const [org, turns] of this.#orgs) if (!turns.reading && turns.waiting.length === 0 && isFull(turns.bucket, now, this.#burstMs)) this.#orgs.delete(org);
  }

  /** Gives the org's next waiting body its turn, on the loop's next turn, once the org is within its burst; refuses those that would wait too long. */
  #next(org: string, turns: OrgTurns): void {
    if (turns.reading) return;
    clearTimeout(turns.timer);
    turns.timer = undefined;
    const now = this.#now();
    // Until what earlier reads overdrew is paid back.
    const waitMs = turns.bucket.waitFor(now, 0);
    // The queue is in order of arrival, so of deadlines too: those that cannot be served in time go first.
    while (turns.waiting.length > 0 && (turns.waiting[0] as Waiter).deadline < now + waitMs) {
      (turns.waiting.shift() as Waiter).refuse(new LargeBodiesTooFastError(waitMs));
    }
    const head = turns.waiting.shift();
    if (head === undefined) {
      if (isFull(turns.bucket, now, this.#burstMs)) this.#orgs.delete(org);
      return;
    }
    if (waitMs > 0) {
      turns.waiting.unshift(head);
      turns.timer = setTimeout(() => this.#next(org, turns), waitMs);
      return;
    }
    turns.reading = true;
    setImmediate(head.go);
  }
}
