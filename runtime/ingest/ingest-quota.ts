// Per-tenant ingest quota: token buckets per org refilled at the org's `ingest_rate_per_second`
// (events) and `ingest_bytes_per_second` (payload bytes, at least 1 MiB/s), each with one second of
// burst; a payload larger than a second's bytes goes once the bucket is full and leaves it in debt
// (token-bucket.ts): at most 7 s for the largest body (8 MiB) at the lowest rate.
// Over either, webhooks, API events and replays get 429 with Retry-After (device messages a
// retryable nack), nothing stored. Only stored events count: a write that stores nothing (a
// duplicate) gives its tokens back, and a duplicate over the quota still gets its 409. The rates are
// the org's as it is when the event is stored, not as a caller read it: a request that waited (out
// of a sandbox reset, a schema check) is held to a rate lowered meanwhile.
// The same place refuses an org's events while its run queue is full (run-backlog.ts).

import type { Clock } from '../clock.ts';
import type { StoredEvent } from '../events/event-record.ts';
import type { EventStore, NewEvent } from '../events/event-store.ts';
import { SluiceError } from '../errors.ts';
import { payloadTextOf } from '../events/payload-text.ts';
import { TokenBucket } from '../token-bucket.ts';
import type { Organization } from '../tenancy/organizations.ts';
import type { RunBacklog } from './run-backlog.ts';

/** The caller should retry after `retryAfterMs`; the server turns this into a Retry-After header. */
export class QuotaExceededError extends SluiceError {
  readonly retryAfterMs: number;
  /**
   * `limit`: what the org may send per second ("100 events", "1048576 payload bytes"); `slotMs`:
   * how long the quota takes to give back what was refused (0 when unknown).
   */
  constructor(
    readonly limit: string,
    retryAfterMs: number,
    readonly slotMs = 0,
  ) {
    // In ms under a second: a device's nack says retry_after_ms, and "1 s" beside 8 ms read as a contradiction.
    const wait = retryAfterMs < 1000 ? `${retryAfterMs} ms` : `${Math.ceil(retryAfterMs / 1000)} s`;
    super(429, 'ingest_quota_exceeded', `This organization may send ${limit} per second; retry after ${wait}.`);
    this.retryAfterMs = retryAfterMs;
  }

  /** The same refusal, told to wait `retryAfterMs` instead. */
  waiting(retryAfterMs: number): QuotaExceededError {
    return new QuotaExceededError(this.limit, retryAfterMs, this.slotMs);
  }
}

/**
 * A refusal by the event rate: `waitMs` to wait, and the slot (how long one event takes to come back;
 * device sockets are told apart by it: retry-stagger.ts).
 */
const eventRefusal = (rate: number, waitMs: number): QuotaExceededError => new QuotaExceededError(eventsOf(rate), waitMs, 1000 / rate);

/** `rate` events, in words ("1 event", "100 events"). */
const eventsOf = (rate: number): string => `${rate} event${rate === 1 ? '' : 's'}`;

/** A refusal by the byte rate: `waitMs` to wait, and the slot (how long `bytes` take to come back). */
const byteRefusal = (rate: number, waitMs: number, bytes: number): QuotaExceededError => new QuotaExceededError(`${rate} payload bytes`, waitMs, (bytes * 1000) / rate);

/** Per org, a bucket refilled at the org's rate (one second of burst); a changed rate starts a full bucket. */
class OrgBuckets {
  readonly #buckets = new Map<string, TokenBucket>();

  /** The ms until `amount` can be taken from the org's bucket: 0 when it can now (or `rate` is null: unlimited). */
  waitFor(orgId: string, rate: number | null, amount: number, now: number): number {
    return rate === null ? 0 : this.#bucket(orgId, rate, now).waitFor(now, amount);
  }

  /** Takes `amount` from the org's bucket on credit of up to `credit` (TokenBucket.takeOnCredit): 0 when taken, else the ms to wait. */
  takeOnCredit(orgId: string, rate: number | null, amount: number, credit: number, now: number): number {
    return rate === null ? 0 : this.#bucket(orgId, rate, now).takeOnCredit(now, amount, credit);
  }

  /** Takes `amount` from the org's bucket (call after waitFor answered 0). */
  take(orgId: string, rate: number | null, amount: number, now: number): void {
    if (rate !== null) this.#bucket(orgId, rate, now).take(now, amount);
  }

  #bucket(orgId: string, rate: number, now: number): TokenBucket {
    let bucket = this.#buckets.get(orgId);
    if (bucket === undefined || bucket.perSecond !== rate) {
      bucket = new TokenBucket(rate, rate, now);
      this.#buckets.set(orgId, bucket);
    }
    return bucket;
  }

  giveBack(orgId: string, amount: number): void {
    this.#buckets.get(orgId)?.giveBack(amount);
  }

  forget(orgId: string): void {
    this.#buckets.delete(orgId);
  }
}

export class IngestQuota {
  readonly #clock: Clock;
  readonly #currentOrg: (orgId: string) => Organization | undefined;
  readonly #events = new OrgBuckets();
  readonly #bytes = new OrgBuckets();
  readonly #backlog: RunBacklog | undefined;

  /**
   * `currentOrg` reads the org as stored now (its rates); the org a caller passes is used when it is
   * gone. `backlog`, when given, refuses an org's events while its run queue is full (run-backlog.ts).
   */
  constructor(clock: Clock, currentOrg: (orgId: string) => Organization | undefined, backlog?: RunBacklog) {
    this.#clock = clock;
    this.#currentOrg = currentOrg;
    this.#backlog = backlog;
  }

  /**
   * Stores the event on one event's worth of the org's quota, taken first: the store starts at
   * once, with no await before it (callers rely on that, see sandbox-generation.ts). With none
   * left, a duplicate still gets its 409 (it stores nothing, so it costs nothing, and its sender
   * stops sending it), anything else QuotaExceededError. When the store throws (a duplicate, a
   * failed write), nothing was stored and the token is given back. `heldMs` > 0: the sender was
   * told to wait that much longer (a device socket's moment, retry-stagger.ts), refused for at least
   * that even with the tokens there, unless the org has no rate now. An org whose run queue is
   * full is refused the same way (RunBacklogFullError), taking no tokens.
   */
  async storeEvent(given: Organization, events: EventStore, newEvent: NewEvent, heldMs = 0): Promise<StoredEvent> {
    const org = this.#currentOrg(given.id) ?? given;
    // Counted only for an org with a byte rate: measuring the payload is not free.
    const bytes = (org.ingest_bytes_per_second ?? null) === null ? 0 : Buffer.byteLength(newEvent.payloadJson ?? payloadTextOf(newEvent.event));
    const refusal = this.#backlog?.refusal(org.id, newEvent.event.environment) ?? this.#take(org, bytes, heldMs);
    if (refusal !== undefined) {
      await events.refuseDuplicate(newEvent);
      throw refusal;
    }
    try {
      return await events.store(newEvent);
    } catch (error) {
      this.#events.giveBack(org.id, 1);
      this.#bytes.giveBack(org.id, bytes);
      throw error;
    }
  }

  /**
   * Takes `events` of the org's quota for events written without storeEvent (a device connection
   * writes its `device.connected` and, when it ends, its `device.disconnected`), on credit: taken
   * whenever the bucket is not in debt, leaving it up to `events` in debt, which the org's next
   * events wait out. Throws QuotaExceededError, taking none, otherwise. (Taken only when there, a
   * connect needing two at once never got in while the org's messages, retried as each token came
   * back, took every one.) A reconnect loop still writes no more than the rate: its debt stops it.
   * Not `onCredit`: taken only once the bucket holds them (or is full, when it holds fewer).
   */
  charge(given: Organization, events = 1, onCredit = true): void {
    const org = this.#currentOrg(given.id) ?? given;
    const rate = org.ingest_rate_per_second ?? null;
    const credit = onCredit ? events : Math.max(0, events - (rate ?? 0));
    // A connection's events are a few bytes: only the event quota counts them.
    const waitMs = this.#events.takeOnCredit(org.id, rate, events, credit, this.#clock.now());
    if (waitMs > 0) throw new QuotaExceededError(eventsOf(rate ?? 0), waitMs);
  }

  /** Lets go of the org's buckets once its removal is finished (one per org that ever sent under a rate otherwise stayed for good). */
  forgetOrg(orgId: string): void {
    this.#events.forget(orgId);
    this.#bytes.forget(orgId);
  }

  /** Gives back `events` charged for events that will not be written after all (a connection never recorded). */
  refund(orgId: string, events: number): void {
    this.#events.giveBack(orgId, events);
  }

  /**
   * Takes one event and `bytes` of quota, or answers the QuotaExceededError to throw, with the
   * longer of the two waits, taking nothing: with both there, `heldMs` (> 0) still refuses, for
   * that wait. Orgs without a rate are unlimited.
   */
  #take(org: Organization, bytes: number, heldMs: number): QuotaExceededError | undefined {
    const now = this.#clock.now();
    const eventRate = org.ingest_rate_per_second ?? null;
    const byteRate = org.ingest_bytes_per_second ?? null;
    const eventWaitMs = this.#events.waitFor(org.id, eventRate, 1, now);
    const byteWaitMs = this.#bytes.waitFor(org.id, byteRate, bytes, now);
    if (eventWaitMs > 0 || byteWaitMs > 0) return eventWaitMs >= byteWaitMs ? eventRefusal(eventRate!, eventWaitMs) : byteRefusal(byteRate!, byteWaitMs, bytes);
    // Both there, but the sender was told to wait longer: refused by the org's rate (the event one, else the byte one).
    if (heldMs > 0 && eventRate !== null) return eventRefusal(eventRate, heldMs);
    if (heldMs > 0 && byteRate !== null) return byteRefusal(byteRate, heldMs, bytes);
    this.#events.take(org.id, eventRate, 1, now);
    this.#bytes.take(org.id, byteRate, bytes, now);
    return undefined;
  }
}
