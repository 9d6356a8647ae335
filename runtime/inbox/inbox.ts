// The tenant inbox: one claim per (org, source, provider event id), written in the same
// transaction as the event. A live claim makes a repeat delivery a 409; old claims are pruned.

import type { Ledger, LedgerKey } from '../ledger/ledger.ts';
import { durably } from '../ledger/durable-write.ts';
import { KeyedSerial } from '../keyed-serial.ts';

export const DEFAULT_DEDUP_WINDOW_MS = 7 * 24 * 60 * 60 * 1000;
/** Claims forgotten per transaction when a name is made again (createFresh). */
export const FORGET_CHUNK = 1_000;

export interface InboxClaim {
  readonly event_id: string;
  readonly claimed_at_ms: number;
  /**
   * The claimed event's environment, on the claims of keyed replays: they share one source
   * (REPLAY_SOURCE) whatever their environment, and a sandbox reset must tell its own apart once
   * the event itself may be gone (pruned). Claims written before it have none.
   */
  readonly environment?: string;
}

/** The clocks of prune-time.ts; without them a claim is dated and measured by the times callers give. */
export interface ClaimClocks {
  /** The time a claim's age is measured by, when earlier than the time a caller gives. */
  readonly agesNow?: () => number;
  /** The time a claim is dated by, when later than the time a caller gives. */
  readonly datesNow?: () => number;
}

export class Inbox {
  readonly #ledger: Ledger;
  readonly #windowMs: number;
  readonly #clocks: ClaimClocks;
  /** Creates of one (org, source) run one at a time (createFresh). */
  readonly #creating = new KeyedSerial();
  constructor(ledger: Ledger, windowMs: number, clocks: ClaimClocks = {}) {
    this.#ledger = ledger;
    this.#windowMs = windowMs;
    this.#clocks = clocks;
  }

  /** The claim that makes this delivery a duplicate, if one is still inside the dedup window. Call inside a write transaction. */
  liveClaim(orgId: string, source: string, providerEventId: string, nowMs: number): InboxClaim | undefined {
    const claim = this.storedClaim(orgId, source, providerEventId);
    return claim !== undefined && this.isLive(claim, nowMs) ? claim : undefined;
  }

  /** The stored claim for this delivery, live or expired but not yet pruned. */
  storedClaim(orgId: string, source: string, providerEventId: string): InboxClaim | undefined {
    return this.#ledger.inbox.get([orgId, source, providerEventId]) as InboxClaim | undefined;
  }

  /**
   * Whether a claim is still inside the dedup window at `nowMs`, or at the time ages are measured
   * by when that is earlier: a wall clock set forward while the runtime runs takes a delivery sent
   * again, its signature still fresh, as new no more than it prunes its claim.
   */
  isLive(claim: InboxClaim, nowMs: number): boolean {
    return claim.claimed_at_ms > Math.min(nowMs, this.#clocks.agesNow?.() ?? nowMs) - this.#windowMs;
  }

  /**
   * Writes a claim, dated `nowMs` or the dating clock's time when later: a claim written while the
   * wall clock was set back past the window, dated by it, was expired once the clock was put right,
   * and a device's message sent again was taken again. Call inside the transaction that stores the
   * event; `environment` is the event's, kept on the claim when given (InboxClaim.environment).
   */
  writeClaim(orgId: string, source: string, providerEventId: string, eventId: string, nowMs: number, environment?: string): void {
    const at = Math.max(nowMs, this.#clocks.datesNow?.() ?? nowMs);
    const claim: InboxClaim = environment === undefined ? { event_id: eventId, claimed_at_ms: at } : { event_id: eventId, claimed_at_ms: at, environment };
    this.#ledger.inbox.put([orgId, source, providerEventId], claim);
    this.#ledger.inboxByTime.put([at, orgId, source, providerEventId], null);
  }

  /**
   * The claims of one (org, source). Provider ids come from payloads and may sort above any
   * sentinel (an emoji's UTF-8 does), so they end where the source changes (names are ASCII, below U+FFFF).
   */
  *claimsOf(orgId: string, source: string): Generator<{ readonly key: LedgerKey; readonly claim: InboxClaim }> {
    for (const { key, value } of this.#ledger.inbox.getRange({ start: [orgId, source], end: [orgId, '\uffff'] })) {
      if ((key as [string, string, string])[1] !== source) return;
      yield { key, claim: value as InboxClaim };
    }
  }

  /**
   * Makes a source (a webhook source, a device's `@device:<name>`) that starts with no dedup memory:
   * while nothing is stored under the name (`exists` false), the claims a deleted one of the name
   * left are forgotten, in transactions of at most `chunk` (each durable before the next, so other
   * tenants' writes go on between them), then `create` runs. A delete leaves its claims: removing
   * a busy device's million claims in its own write held every tenant's writes for seconds.
   * Creates of one name run one at a time, so none forgets the claims of a source made meanwhile,
   * and after the deletes of the name queued before them (`deleting`).
   */
  createFresh<T>(orgId: string, source: string, exists: () => boolean, create: () => Promise<T>, chunk = FORGET_CHUNK): Promise<T> {
    return this.#creating.run(JSON.stringify([orgId, source]), async () => {
      if (!exists()) {
        const { root } = this.#ledger;
        let removed: number;
        do removed = await durably(root, root.transaction(() => this.removeSourceClaimsWithin(orgId, source, chunk)));
        while (removed === chunk);
      }
      return create();
    });
  }

  /**
   * Runs the delete of a source (or device) in the queue of creates of its name: a create sent while
   * the delete was being written saw the name still taken, kept the deleted one's claims, then
   * inserted once the delete committed, and the new device's first messages were acked as
   * duplicates of the old one's and never stored. Resolve only once the delete is durable.
   */
  deleting<T>(orgId: string, source: string, remove: () => Promise<T>): Promise<T> {
    return this.#creating.run(JSON.stringify([orgId, source]), remove);
  }

  /**
   * Forgets the claims of a source, at most `limit` of them (a source made again under its name,
   * a sandbox reset); returns how many. Call inside a write transaction. Their time index entries
   * stay until the prune, which skips a claim that is gone.
   */
  removeSourceClaimsWithin(orgId: string, source: string, limit = Number.POSITIVE_INFINITY): number {
    let removed = 0;
    for (const { key } of this.claimsOf(orgId, source)) {
      if (removed === limit) break;
      this.#ledger.inbox.remove(key);
      removed++;
    }
    return removed;
  }

  /**
   * Removes every claim older than the window, oldest first, in transactions of at most `passSize`
   * (each durable before the next is read, so requests go on in between); resolves with the number
   * of index entries removed. A claim renewed since is left in place.
   */
  async prune(nowMs: number, passSize = 10_000, stop?: AbortSignal): Promise<number> {
    let removed = 0;
    for (;;) {
      const pass = await this.#prunePass(nowMs, passSize);
      removed += pass;
      // Closing: the rest is left to the next start's prune.
      if (pass < passSize || stop?.aborted === true) return removed;
    }
  }

  async #prunePass(nowMs: number, limit: number): Promise<number> {
    const { inbox, inboxByTime, root } = this.#ledger;
    const cutoff = nowMs - this.#windowMs;
    const expired = [...inboxByTime.getKeys({ end: [cutoff], limit })] as [number, string, string, string][];
    if (expired.length === 0) return 0;
    await durably(
      root,
      root.transaction(() => {
        for (const [at, orgId, source, providerEventId] of expired) {
          inboxByTime.remove([at, orgId, source, providerEventId]);
          const claim = inbox.get([orgId, source, providerEventId]) as InboxClaim | undefined;
          if (claim !== undefined && claim.claimed_at_ms === at) inbox.remove([orgId, source, providerEventId]);
        }
      }),
    );
    return expired.length;
  }
}
