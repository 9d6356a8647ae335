// Whose turn it is for the room a closed webhook socket frees, when orgs wait for the process's
// total (org-socket-share.ts): the waiting org that has used the least socket time lately. Each
// org's use is the milliseconds its sockets were open, decaying by half every USE_HALF_LIFE_MS, so
// an org whose receiver answers at once (or that sends now and then) goes before orgs whose
// receivers hold sockets for seconds, and an org that held many for long is passed by the others
// until its use has come down to theirs, never for good. Counting sockets instead (each waiting
// org one socket in turn) let an org whose receiver answered at once through once per round of
// 3,000 orgs whose receivers held theirs for seconds: 20 s apart (a probe of 2026-12-06). A first
// try forgot an org whenever it held nothing and started it again near the least: orgs sending
// one request at a time then passed an org with a backlog forever (review). Use is now forgotten
// only once it has decayed to nothing, or when no org waits.

/** How fast socket time used stops counting: half of it every minute. */
export const USE_HALF_LIFE_MS = 60_000;

/** Use below which an org holding no socket is forgotten (it comes back at 0). */
const FORGOTTEN_BELOW_MS = 1;

const DECAY_PER_MS = Math.LN2 / USE_HALF_LIFE_MS;

interface OrgUse {
  /** Decayed socket time used, up to `at`. */
  usedMs: number;
  /** Sockets open since `at`. */
  open: number;
  at: number;
}

export class OrgSocketTurns {
  readonly #orgs = new Map<string, OrgUse>();

  /** Sockets of `org` open now. */
  open(org: string): number {
    return this.#orgs.get(org)?.open ?? 0;
  }

  /** The decayed socket time `org` has used, at `now` (ms on a monotonic clock). */
  usedMs(org: string, now: number): number {
    const use = this.#orgs.get(org);
    return use === undefined ? 0 : decayed(use, now);
  }

  opened(org: string, now: number): void {
    this.#brought(org, now).open += 1;
  }

  closed(org: string, now: number): void {
    const use = this.#brought(org, now);
    use.open = Math.max(0, use.open - 1);
  }

  /** Forgets `org` (the caller knows nothing of it waits) if it holds no socket and its use has decayed to nothing. */
  forgetIfIdle(org: string, now: number): void {
    const use = this.#orgs.get(org);
    if (use !== undefined && use.open === 0 && decayed(use, now) < FORGOTTEN_BELOW_MS) this.#orgs.delete(org);
  }

  /** No org waits any more (nothing to take turns for): forgets every org that holds no socket. */
  forgetAllIdle(): void {
    for (const [org, use] of this.#orgs) if (use.open === 0) this.#orgs.delete(org);
  }

  /** The org's use brought up to `now` (made, at 0, if it had none). */
  #brought(org: string, now: number): OrgUse {
    const use = this.#orgs.get(org);
    if (use === undefined) {
      const made = { usedMs: 0, open: 0, at: now };
      this.#orgs.set(org, made);
      return made;
    }
    use.usedMs = decayed(use, now);
    use.at = now;
    return use;
  }
}

/** The use at `now`: what it was at `at`, decayed, plus its open sockets' time since, decayed as it accrued. */
function decayed(use: OrgUse, now: number): number {
  const elapsed = Math.max(0, now - use.at);
  if (elapsed === 0) return use.usedMs;
  const kept = Math.exp(-DECAY_PER_MS * elapsed);
  return use.usedMs * kept + (use.open * (1 - kept)) / DECAY_PER_MS;
}
