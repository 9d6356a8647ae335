// Reads whose answer may be a page of up to MAX_PAGE_BYTES (the lists and the export, Route
// `answersPages`): building one of 16 MiB holds the event loop ~150-300 ms, and thirty asked at
// once by one org were built one after another in a single turn, holding every other org's
// requests for seconds, most of them only to be refused for the org's unread answers afterwards.
// An org's pages are built one at a time, each in an event-loop turn of its own (other requests are
// read between them), and each is refused when its turn comes unless the org's unread answers
// (unsent-replies.ts) leave room for one as large as its previous page: a burst of large pages past
// the org's share costs the pages that fit, not one each.

import { KeyedSerial } from '../keyed-serial.ts';

/** Orgs whose last page size is remembered at most; past it they are forgotten, oldest first. */
const REMEMBERED_ORGS = 10_000;

export class PageTurns {
  readonly #serial = new KeyedSerial();
  /** Each org's last page, in characters (its bytes at least). */
  readonly #lastPage = new Map<string, number>();

  /**
   * Runs `build` for `tenant` once its earlier page builds are done and the event loop has turned,
   * if `hasRoomFor` says the org's unread answers leave room for its previous page; else throws what
   * `refusal` gives.
   */
  run<T>(tenant: string, hasRoomFor: (bytes: number) => boolean, refusal: () => Error, build: () => T | Promise<T>): Promise<T> {
    return this.#serial.run(tenant, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      if (!hasRoomFor(Math.max(1, this.#lastPage.get(tenant) ?? 0))) throw refusal();
      return build();
    });
  }

  /** Remembers the size of the page just answered to `tenant` (in characters). */
  answered(tenant: string, chars: number): void {
    this.#lastPage.delete(tenant);
    if (this.#lastPage.size >= REMEMBERED_ORGS) this.#lastPage.delete(this.#lastPage.keys().next().value!);
    this.#lastPage.set(tenant, chars);
  }
}
