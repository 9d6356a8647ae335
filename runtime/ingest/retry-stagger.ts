// The waits told to an org's device sockets that its quota refused, spread out. A refusal's wait
// alone is the time until the org's next token, so every socket refused within one token's time was
// told the same moment, came back together, and all but one were refused again: fifty devices
// sharing a quota sent 47 refused messages for each one stored (each costing a parse and a lookup on
// the event loop). A socket refused with no moment of its own still ahead is given the org's next
// free slot (one token after the last one given); one refused again before its moment (its other
// messages, or a client that does not wait) is told the same moment and moves no one else's, so a
// client that ignores the hint cannot push the other sockets' moments out. A socket told a moment is
// held to it (waitLeft): a token that comes back before its moment is for the sockets whose moment
// has come. Before that, a client that sent again at once took each token the moment it came back,
// ahead of the sockets that wait, and, stored now and then, was refused too seldom to be closed:
// in one of seven runs of 200 such devices against 50 kit clients at 200 events/s they took 95 %
// of the acks for a minute (none of seven since; typically they get ~3 % either way).
// The refusals a socket gets before its moment are counted (`early`), so that the caller can close
// one that does not wait: each costs a parse and a nack.
// Webhooks and API calls get their plain wait: Retry-After counts whole seconds, and a request has
// no socket to tell apart.

/** The furthest a moment given reaches past the refusal's own wait: a crowd larger than that comes back in waves. */
export const MAX_STAGGER_MS = 10_000;

interface Timeline {
  /** The last moment given (clock ms). */
  readonly at: number;
  /** The slot it was given with: another (the org's rate changed) starts the timeline again. */
  readonly slotMs: number;
}

/** A sender's moment, and how many refusals it got before it (after the one that gave it). */
interface Moment {
  readonly at: number;
  /** When it was given: a moment given later than now (the wall clock was set back since) holds no one. */
  readonly toldAt: number;
  early: number;
}

/** What to tell a refused sender. */
export interface Hint {
  readonly waitMs: number;
  /** Refusals the sender got before the moment it was told, this one included (0: it waited, or had none). */
  readonly early: number;
}

export class RetryStagger {
  /** Per org, its last moment given; one that has passed counts as none (overwritten at the next refusal). */
  readonly #orgs = new Map<string, Timeline>();
  /** Each sender's moment still ahead, if any: by its socket's own object, so nothing outlives the socket. */
  readonly #moments = new WeakMap<object, Moment>();

  /**
   * The wait to tell `sender` (one of `orgId`'s sockets): at least `waitMs` (until its tokens are
   * there); its own moment if still ahead; else one slot of `slotMs` after the org's last moment
   * still ahead, at most MAX_STAGGER_MS past `waitMs`.
   */
  hint(orgId: string, sender: object, now: number, waitMs: number, slotMs: number): Hint {
    const earliest = now + waitMs;
    const mine = this.#moments.get(sender);
    // A moment further ahead than any given (the wall clock was set back since: an hour back told
    // sockets to wait an hour) is no moment, and is replaced below; the timeline's likewise.
    if (mine !== undefined && mine.at > now && mine.at <= earliest + MAX_STAGGER_MS) {
      mine.early += 1;
      return { waitMs: Math.max(1, Math.ceil(Math.max(mine.at, earliest) - now)), early: mine.early };
    }
    const timeline = this.#orgs.get(orgId);
    const ahead = timeline !== undefined && timeline.at > now && timeline.at <= earliest + MAX_STAGGER_MS && timeline.slotMs === slotMs;
    const at = ahead ? Math.min(earliest + MAX_STAGGER_MS, Math.max(earliest, timeline.at + slotMs)) : earliest;
    this.#orgs.set(orgId, { at, slotMs });
    this.#moments.set(sender, { at, toldAt: now, early: 0 });
    return { waitMs: Math.max(1, Math.ceil(at - now)), early: 0 };
  }

  /**
   * The ms until `sender`'s moment, while one is ahead (0: none): until then it takes no token,
   * refused with the same moment (hint counts it as early).
   */
  waitLeft(sender: object, now: number): number {
    const mine = this.#moments.get(sender);
    return mine === undefined || mine.at <= now || now < mine.toldAt ? 0 : Math.ceil(mine.at - now);
  }

  forget(orgId: string): void {
    this.#orgs.delete(orgId);
  }
}
