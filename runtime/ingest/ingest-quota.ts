// Per-tenant ingest quota: a token bucket per org refilled at the org's `ingest_rate_per_second`
// (one second of burst). Over it, webhooks, API events and replays get 429 with Retry-After,
// nothing stored. Only stored events count: a write that stores nothing (a duplicate) gives its token back.

import type { Clock } from '../clock.ts';
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
   * Runs `store` on one event's worth of quota, taken first (QuotaExceededError when there is none);
   * when `store` throws (a duplicate, a failed write), nothing was stored and the token is given back.
   */
  async spend<T>(org: Organization, store: () => Promise<T>): Promise<T> {
    this.#take(org);
    try {
      return await store();
    } catch (error) {
      const bucket = this.#buckets.get(org.id);
      if (bucket !== undefined) bucket.tokens = Math.min(bucket.rate, bucket.tokens + 1);
      throw error;
    }
  }

  /** Takes one event's worth of quota or throws QuotaExceededError. Orgs without a rate are unlimited. */
  #take(org: Organization): void {
    const rate = org.ingest_rate_per_second ?? null;
    if (rate === null) return;
    const now = this.#clock.now();
    let bucket = this.#buckets.get(org.id);
    if (bucket === undefined || bucket.rate !== rate) {
      bucket = { tokens: rate, at: now, rate };
      this.#buckets.set(org.id, bucket);
    }
    bucket.tokens = Math.min(rate, bucket.tokens + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    if (bucket.tokens < 1) throw new QuotaExceededError(rate, Math.max(1, Math.ceil(((1 - bucket.tokens) / rate) * 1000)));
    bucket.tokens -= 1;
  }
}
