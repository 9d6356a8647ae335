// Per-tenant ingest quota: a token bucket per org refilled at the org's `ingest_rate_per_second`
// (one second of burst). Over it, webhooks, API events and replays get 429 with Retry-After (device messages a retryable nack),
// nothing stored. Only stored events count: a write that stores nothing (a duplicate) gives its
// token back, and a duplicate over the quota still gets its 409.

import type { Clock } from '../clock.ts';
import type { StoredEvent } from '../events/event-record.ts';
import type { EventStore, NewEvent } from '../events/event-store.ts';
import { SluiceError } from '../errors.ts';
import { TokenBucket } from '../token-bucket.ts';
import type { Organization } from '../tenancy/organizations.ts';

/** The caller should retry after `retryAfterMs`; the server turns this into a Retry-After header. */
export class QuotaExceededError extends SluiceError {
  readonly retryAfterMs: number;
  constructor(rate: number, retryAfterMs: number) {
    super(429, 'ingest_quota_exceeded', `This organization may send ${rate} events per second; retry after ${Math.ceil(retryAfterMs / 1000)} s.`);
    this.retryAfterMs = retryAfterMs;
  }
}

export class IngestQuota {
  readonly #clock: Clock;
  readonly #buckets = new Map<string, TokenBucket>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /**
   * Stores the event on one event's worth of the org's quota, taken first: the store starts at
   * once, with no await before it (callers rely on that, see sandbox-generation.ts). With none
   * left, a duplicate still gets its 409 (it stores nothing, so it costs nothing, and its sender
   * stops sending it), anything else QuotaExceededError. When the store throws (a duplicate, a
   * failed write), nothing was stored and the token is given back.
   */
  async storeEvent(org: Organization, events: EventStore, newEvent: NewEvent): Promise<StoredEvent> {
    const refusal = this.#take(org);
    if (refusal !== undefined) {
      await events.refuseDuplicate(newEvent);
      throw refusal;
    }
    try {
      return await events.store(newEvent);
    } catch (error) {
      this.#buckets.get(org.id)?.giveBack();
      throw error;
    }
  }

  /**
   * Takes one event's worth of the org's quota for events written without storeEvent (a device
   * connecting writes `device.connected`, and `device.disconnected` of the socket it replaces);
   * throws QuotaExceededError when none is left.
   */
  charge(org: Organization): void {
    const refusal = this.#take(org);
    if (refusal !== undefined) throw refusal;
  }

  /** Takes one event's worth of quota, or answers the QuotaExceededError to throw. Orgs without a rate are unlimited. */
  #take(org: Organization): QuotaExceededError | undefined {
    const rate = org.ingest_rate_per_second ?? null;
    if (rate === null) return undefined;
    const now = this.#clock.now();
    let bucket = this.#buckets.get(org.id);
    // One second of burst; a changed rate starts a full bucket.
    if (bucket === undefined || bucket.perSecond !== rate) {
      bucket = new TokenBucket(rate, rate, now);
      this.#buckets.set(org.id, bucket);
    }
    const waitMs = bucket.take(now);
    return waitMs === 0 ? undefined : new QuotaExceededError(rate, waitMs);
  }
}
