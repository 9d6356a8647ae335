// The waits an org's refused senders are told, spread out. A refusal's wait alone is the time until
// the org's next token, so every sender refused within one token's time was told the same moment,
// came back together, and all but one were refused again: fifty devices sharing a quota sent 47
// refused messages for each one stored (each costing a parse and a lookup on the event loop). Each
// refusal is given the next free slot instead: the moment its token comes, and no sooner than one
// slot (the token time of what it sends) after the wait told before it.

/** The furthest a hint reaches past the refusal's own wait: a crowd larger than that comes back in waves. */
export const MAX_STAGGER_MS = 10_000;

export class RetryStagger {
  /** Per org, the moment the last hint told a sender to come back (clock ms); gone once passed. */
  readonly #told = new Map<string, number>();

  /**
   * The wait to tell a refused sender: at least `waitMs` (until its tokens are there), and a slot of
   * `slotMs` after the previous hint still ahead, at most MAX_STAGGER_MS past `waitMs`.
   */
  hint(orgId: string, now: number, waitMs: number, slotMs: number): number {
    const earliest = now + waitMs;
    const previous = this.#told.get(orgId);
    const at = previous === undefined || previous <= now ? earliest : Math.min(earliest + MAX_STAGGER_MS, Math.max(earliest, previous + slotMs));
    this.#told.set(orgId, at);
    return Math.max(1, Math.ceil(at - now));
  }

  forget(orgId: string): void {
    this.#told.delete(orgId);
  }
}
