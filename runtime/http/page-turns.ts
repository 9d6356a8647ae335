// Reads whose answer may be a page of up to MAX_PAGE_BYTES (the lists and the export, Route
// `answersPages`): building one of 16 MiB holds the event loop ~150-300 ms, and thirty asked at
// once by one org were built one after another in a single turn, holding every other org's
// requests for seconds, most of them only to be refused for the org's unread answers afterwards.
// An org's pages are built one at a time, each in an event-loop turn of its own (other requests are
// read between them), and each is admitted again when its turn comes, told how large the answer to
// the very same request (path and query) was last time: refused unless the org's unread answers
// (unsent-replies.ts) leave room for that, a burst of one large page costs the pages that fit, not
// one each, while the org's other, small reads are not held to it.

//
// A request is remembered by a digest of its path and query, never as sent: a cursor may be 2 KiB,
// and percent-encoded thrice that, and 1,000 orgs' 60 such requests each held 357 MB (a probe).

import { createHash } from 'node:crypto';
import { KeyedSerial } from '../keyed-serial.ts';
import { setNewest } from '../newest-entries.ts';

/** Requests of one org whose last answer size is remembered at most; past it its oldest are forgotten. */
const REMEMBERED_PER_ORG = 16;
/** Orgs whose requests are remembered at most; past it the org that answered a page longest ago is. */
const REMEMBERED_ORGS = 10_000;

/** What a request is remembered by: 16 bytes of the SHA-256 of its path and query. */
const digestOf = (request: string): string => createHash('sha256').update(request).digest('base64url').slice(0, 22);

export class PageTurns {
  readonly #serial = new KeyedSerial();
  /**
   * Per org, the last answer to each of its requests (path and query), in characters (its bytes at
   * least). Per org, so that no org's many requests (`?limit=5`, `?limit=05`, ...) push out
   * another's: its own are the only ones it can.
   */
  readonly #lastAnswer = new Map<string, Map<string, number>>();

  /**
   * Runs `build` for `tenant` once its earlier page builds are done and the event loop has turned,
   * after `admit` (which throws to refuse) is told the characters of the last answer to `request`
   * (0 when none is remembered).
   */
  run<T>(tenant: string, request: string, admit: (lastAnswerChars: number) => void, build: () => T | Promise<T>): Promise<T> {
    return this.#serial.run(tenant, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      admit(this.#lastAnswer.get(tenant)?.get(digestOf(request)) ?? 0);
      return build();
    });
  }

  /** Remembers the size of the answer just given to `tenant`'s `request` (in characters). */
  answered(tenant: string, request: string, chars: number): void {
    const requests = this.#lastAnswer.get(tenant) ?? new Map<string, number>();
    setNewest(this.#lastAnswer, tenant, requests, REMEMBERED_ORGS);
    setNewest(requests, digestOf(request), chars, REMEMBERED_PER_ORG);
  }

  /** Forgets what `tenant`'s requests answered (a deleted org). */
  forget(tenant: string): void {
    this.#lastAnswer.delete(tenant);
  }

}
