// Reads whose answer may be a page of up to MAX_PAGE_BYTES (the lists and the export, Route
// `answersPages`): building one of 16 MiB holds the event loop ~150-300 ms, and thirty asked at
// once by one org were built one after another in a single turn, holding every other org's
// requests for seconds, most of them only to be refused for the org's unread answers afterwards.
// An org's pages are built one at a time, each in an event-loop turn of its own (other requests are
// read between them), and each is admitted again when its turn comes, told how large the answer to
// the very same request (path and query) was last time: refused unless the org's unread answers
// (unsent-replies.ts) leave room for that, a burst of one large page costs the pages that fit, not
// one each, while the org's other, small reads are not held to it.

import { KeyedSerial } from '../keyed-serial.ts';

/** Requests whose last answer size is remembered at most; past it the oldest are forgotten. */
const REMEMBERED_REQUESTS = 10_000;

export class PageTurns {
  readonly #serial = new KeyedSerial();
  /** The last answer to each request (its org, path and query), in characters (its bytes at least). */
  readonly #lastAnswer = new Map<string, number>();

  /**
   * Runs `build` for `tenant` once its earlier page builds are done and the event loop has turned,
   * after `admit` (which throws to refuse) is told the characters of the last answer to `request`
   * (0 when none is remembered).
   */
  run<T>(tenant: string, request: string, admit: (lastAnswerChars: number) => void, build: () => T | Promise<T>): Promise<T> {
    return this.#serial.run(tenant, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      admit(this.#lastAnswer.get(request) ?? 0);
      return build();
    });
  }

  /** Remembers the size of the answer just given to `request` (in characters). */
  answered(request: string, chars: number): void {
    this.#lastAnswer.delete(request);
    if (this.#lastAnswer.size >= REMEMBERED_REQUESTS) this.#lastAnswer.delete(this.#lastAnswer.keys().next().value!);
    this.#lastAnswer.set(request, chars);
  }
}
