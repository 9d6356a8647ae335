// Per-tenant ingest quota: a token bucket per org refilled at the org's `ingest_rate_per_second`
// (one second of burst). Over it, webhooks, API events and replays get 429 with Retry-After (device messages a retryable nack),
// nothing stored. Only stored events count: a write that stores nothing (a duplicate) gives its
// token back, and a duplicate over the quota still gets its 409.

import type { Clock } from '../clock.ts';
import type { StoredEvent } from '../events/event-record.ts';
import type { EventStore, NewEvent } from '../events/event-store.ts';
import { SluiceError } from '../errors.ts';
import type { Organization } from '../tenancy/organizations.ts';

/** The caller should retry after `retryAfterMs`; the server turns this into a Retry-After header. */
export class QuotaExceededError extends SluiceError {
  readonly retryAfterMs: number;
  constructor(rate: number, retryAfterMs: number) {
    super(429, 'ingest_quota_exceeded', `This organization may send ${rate} events per second; retry after ${Math.ceil(retryAfterMs / 1000)} s.`);
    this.retryAfterMs = retryAfterMs;
  }
}

interface Bucket {
  tokens: number;
  at: number;
  rate: number;
}

export class IngestQuota {
  readonly #clock: Clock;
  readonly #buckets = new Map<string, Bucket>();

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
      const bucket = this.#buckets.get(org.id);
      if (bucket !== undefined) bucket.tokens = Math.min(bucket.rate, bucket.tokens + 1);
      throw error;
    }
  }

  /** Takes one event's worth of quota, or answers the QuotaExceededError to throw. Orgs without a rate are unlimited. */
  #take(org: Organization): QuotaExceededError | undefined {
    const rate = org.ingest_rate_per_second ?? null;
    if (rate === null) return undefined;
    const now = this.#clock.now();
    let bucket = this.#buckets.get(org.id);
    if (bucket === undefined || bucket.rate !== rate) {
      bucket = { tokens: rate, at: now, rate };
      this.#buckets.set(org.id, bucket);
    }
    bucket.tokens = Math.min(rate, bucket.tokens + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    if (bucket.tokens < 1) return new QuotaExceededError(rate, Math.max(1, Math.ceil(((1 - bucket.tokens) / rate) * 1000)));
    bucket.tokens -= 1;
    return undefined;
  }
}
