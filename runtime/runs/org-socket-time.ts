// The socket time each org has used (the milliseconds its sockets to receivers were open, summed):
// what decides which waiting org gets the room a closed socket frees (org-socket-share.ts), least
// used first. Counting sockets instead served every waiting org in turns, one socket each, so with
// 3,000 orgs whose receivers hold a socket for seconds, an org whose receiver answers at once got
// one request through per round of them all (~20 s apart, a probe of 2026-12-06). An org that comes
// (back) starts RETURN_CREDIT_MS below the use of the last org served: ahead of the orgs taking
// turns, by a little, and never by more however long it sent nothing (one that started at 0 would
// go first until it had used what busy orgs used in hours). One with no socket open and nothing
// waiting is forgotten.

interface OrgUse {
  /** Socket time used up to `at`. */
  usedMs: number;
  /** Sockets open since `at`. */
  open: number;
  at: number;
}

/** How far below the use of the last org served an org that comes (back) starts: a second of socket time. */
export const RETURN_CREDIT_MS = 1_000;

export class OrgSocketTime {
  readonly #now: () => number;
  readonly #orgs = new Map<string, OrgUse>();
  /** The most any org had used when it was served (it waited for room). */
  #servedMs = 0;

  /** `now`: a monotonic clock in ms. */
  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /** Sockets of `org` open now. */
  open(org: string): number {
    return this.#orgs.get(org)?.open ?? 0;
  }

  /** Socket time `org` has used, up to now. */
  usedMs(org: string): number {
    const use = this.#orgs.get(org);
    return use === undefined ? this.#startMs() : use.usedMs + use.open * (this.#now() - use.at);
  }

  opened(org: string): void {
    this.#accrued(org).open += 1;
  }

  closed(org: string): void {
    const use = this.#accrued(org);
    use.open = Math.max(0, use.open - 1);
  }

  /** `org` was given room (it waited): an org that comes later starts from what it had used (RETURN_CREDIT_MS). */
  served(org: string): void {
    this.#servedMs = Math.max(this.#servedMs, this.usedMs(org));
  }

  /** Forgets `org` if it holds no socket (the caller knows nothing of it waits): it starts afresh when it comes back. */
  forgetIfIdle(org: string): void {
    if (this.#orgs.get(org)?.open === 0) this.#orgs.delete(org);
  }

  /** Where an org not tracked starts. */
  #startMs(): number {
    return Math.max(0, this.#servedMs - RETURN_CREDIT_MS);
  }

  /** The org's use, brought up to now (made if it had none). */
  #accrued(org: string): OrgUse {
    const now = this.#now();
    const use = this.#orgs.get(org);
    if (use === undefined) {
      const made = { usedMs: this.#startMs(), open: 0, at: now };
      this.#orgs.set(org, made);
      return made;
    }
    use.usedMs += use.open * (now - use.at);
    use.at = now;
    return use;
  }
}
