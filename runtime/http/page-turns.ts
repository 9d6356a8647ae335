// Reads whose answer may be a page of up to MAX_PAGE_BYTES (the lists and the export, Route
// `answersPages`): building one of 16 MiB holds the event loop ~150-300 ms, and thirty asked at
// once by one org were built one after another in a single turn, holding every other org's
// requests for seconds, most of them only to be refused for the org's unread answers afterwards.
// An org's pages are built one at a time, and each is admitted again when its turn comes, told how
// many bytes the answer to the very same request (path and query) had last time: refused unless
// the org's unread answers (unsent-replies.ts) leave room for that, a burst of one large page costs
// the pages that fit, not one each, while the org's other, small reads are not held to it.
// Builds of every org share the event loop's turns: each org's next build waits in one queue, and a
// turn builds from it, oldest first, until TURN_BUILD_MS has gone (a large page takes the turn's
// rest), then lets the loop read other requests: eleven orgs' first export pages asked at once had
// been built in one turn (5 s held; a probe of 2026-12-07).
//
// A request is remembered by a digest of its path and query, never as sent: a cursor may be 2 KiB,
// and percent-encoded thrice that, and 1,000 orgs' 60 such requests each held 357 MB (a probe).

import { createHash } from 'node:crypto';
import { FifoQueue } from '../../actors/fifo-queue.ts';
import { KeyedSerial } from '../keyed-serial.ts';
import { setNewest } from '../newest-entries.ts';

/** Requests of one org whose last answer size is remembered at most; past it its oldest are forgotten. */
const REMEMBERED_PER_ORG = 16;
/** Orgs whose requests are remembered at most; past it the org that answered a page longest ago is. */
const REMEMBERED_ORGS = 10_000;
/** How long one event-loop turn goes on building pages (small list pages take well under 1 ms each). */
const TURN_BUILD_MS = 5;

/** What a request is remembered by: 16 bytes of the SHA-256 of its path and query. */
const digestOf = (request: string): string => createHash('sha256').update(request).digest('base64url').slice(0, 22);

export class PageTurns {
  readonly #serial = new KeyedSerial();
  /**
   * Per org, the last answer to each of its requests (path and query), in bytes. Per org, so that
   * no org's many requests (`?limit=5`, `?limit=05`, ...) push out another's: its own are the only
   * ones it can.
   */
  readonly #lastAnswer = new Map<string, Map<string, number>>();
  /** Each org's next build (one per org at most: the org's serial holds the rest), oldest first. */
  readonly #ready = new FifoQueue<() => void>();
  #turnAsked = false;

  /**
   * Runs `build` for `tenant` once its earlier page builds are done and the event loop has turned,
   * in the builds' shared turns, after `admit` (which throws to refuse) is told the bytes of the last
   * answer to `request` (0 when none is remembered).
   */
  run<T>(tenant: string, request: string, admit: (lastAnswerBytes: number) => void, build: () => T | Promise<T>): Promise<T> {
    return this.#serial.run(
      tenant,
      () =>
        new Promise<T>((resolve, reject) => {
          this.#ready.push(() => {
            try {
              admit(this.#lastAnswer.get(tenant)?.get(digestOf(request)) ?? 0);
              resolve(build());
            } catch (error) {
              reject(error);
            }
          });
          this.#askTurn();
        }),
    );
  }

  #askTurn(): void {
    if (this.#turnAsked) return;
    this.#turnAsked = true;
    setImmediate(() => this.#buildInTurn());
  }

  /** Builds the pages waiting when the turn began, oldest first, until TURN_BUILD_MS has gone. */
  #buildInTurn(): void {
    this.#turnAsked = false;
    const started = performance.now();
    // Nothing joins the queue meanwhile: an org's next build is queued by its serial, in a microtask
    // once this one settles, so after this turn (and so in a later one).
    while (this.#ready.size > 0 && performance.now() - started < TURN_BUILD_MS) this.#ready.shift()!();
    if (this.#ready.size > 0) this.#askTurn();
  }

  /** Remembers the size of the answer just given to `tenant`'s `request` (its UTF-8 bytes). */
  answered(tenant: string, request: string, bytes: number): void {
    const requests = this.#lastAnswer.get(tenant) ?? new Map<string, number>();
    setNewest(this.#lastAnswer, tenant, requests, REMEMBERED_ORGS);
    setNewest(requests, digestOf(request), bytes, REMEMBERED_PER_ORG);
  }

  /** Forgets what `tenant`'s requests answered (a deleted org). */
  forget(tenant: string): void {
    this.#lastAnswer.delete(tenant);
  }

}
