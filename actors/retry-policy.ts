// Retry schedule of a failed step: exponential backoff with a cap and a deterministic jitter, a
// retry budget, and server-given Retry-After hints. Pure: the current time is always passed in.

/**
 * How often and how patiently a retryable step failure is retried.
 * `maxRetries` counts retries, not attempts: 5 retries means at most 6 attempts.
 */
export interface RetryPolicy {
  readonly maxRetries: number;
  readonly initialMs: number;
  readonly maxMs: number;
}

/** DESIGN §5: 30 s, doubling, capped at 1 h, at most 5 retries. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  maxRetries: 5,
  initialMs: 30_000,
  maxMs: 3_600_000,
});

/** Bounds a per-step override must respect (checked by the workflow parser). */
export const RETRY_LIMITS = Object.freeze({
  maxRetries: 20,
  /** A retry timer longer than a week is almost certainly a typo. */
  maxMs: 7 * 24 * 3_600_000,
});

/** A per-step override as written in a workflow document; missing fields fall back to the default. */
export interface RetryOverride {
  readonly max_retries?: number;
  readonly initial_ms?: number;
  readonly max_ms?: number;
}

/**
 * Merges a step's override onto the default. When only `initial_ms` is given and it exceeds the
 * default cap, the cap rises to meet it instead of silently shortening the first delay.
 */
export function resolveRetryPolicy(override?: RetryOverride): RetryPolicy {
  if (override === undefined) return DEFAULT_RETRY_POLICY;
  const initialMs = override.initial_ms ?? DEFAULT_RETRY_POLICY.initialMs;
  const maxMs = override.max_ms ?? Math.max(DEFAULT_RETRY_POLICY.maxMs, initialMs);
  return {
    maxRetries: override.max_retries ?? DEFAULT_RETRY_POLICY.maxRetries,
    initialMs,
    maxMs,
  };
}

/**
 * How much of its backoff a retry may give up: runs that failed together (a receiver went down)
 * spread their retries over the last fifth of each wait instead of all arriving at once.
 */
export const RETRY_JITTER = 0.2;

/**
 * Delay before the next attempt after failed attempt number `failedAttempts` (1 = the first
 * attempt failed), or `'exhausted'` when the retry budget is spent. The backoff is
 * `initialMs * 2^(failedAttempts-1)` capped at `maxMs`, shortened by `jitter` (in [0, 1)) times
 * RETRY_JITTER of itself: never later than the schedule, never sooner than 80 % of it. A server hint (`retryAfterMs`, from
 * `Retry-After` or the hook-runner) replaces the backoff but is still capped at `maxMs`,
 * so a hostile endpoint cannot park a run for a year, and waits at least MIN_HINT_MS (or
 * `initialMs`, if shorter), so `Retry-After: 0` cannot spend the whole budget in milliseconds;
 * it never extends the retry budget.
 */
export function nextRetryDelay(policy: RetryPolicy, failedAttempts: number, retryAfterMs?: number, jitter = 0): number | 'exhausted' {
  if (!Number.isInteger(failedAttempts) || failedAttempts < 1) {
    throw new RangeError(`failedAttempts must be a positive integer, got ${failedAttempts}`);
  }
  if (failedAttempts > policy.maxRetries) return 'exhausted';
  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs)) {
    return Math.min(Math.max(Math.min(MIN_HINT_MS, policy.initialMs), Math.ceil(retryAfterMs)), policy.maxMs);
  }
  // 2^52 already exceeds any cap; clamping the exponent keeps the arithmetic finite.
  const exponent = Math.min(failedAttempts - 1, 52);
  const backoff = Math.min(policy.initialMs * 2 ** exponent, policy.maxMs);
  return Math.round(backoff * (1 - RETRY_JITTER * jitter));
}

/**
 * A fraction in [0, 1) fixed by `key` (FNV-1a): the same run, step and failure always get the same
 * jitter, so the pure run machine stays deterministic and a replayed decision repeats itself.
 */
export function jitterOf(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return (hash >>> 0) / 2 ** 32;
}

/** The shortest wait a Retry-After hint can ask for (a step's own shorter initial delay still wins). */
export const MIN_HINT_MS = 1000;

const DELTA_SECONDS = /^\d+$/;
/** Delta-seconds past this (~31,700 years) are read as it: any length is valid (RFC 9110), and the step's max_ms caps the wait anyway. */
const MAX_DELTA_SECONDS = 1e12;

/** asctime's date (`Sun Nov  6 08:49:37 1994`), one of the three HTTP-date forms. */
const ASCTIME = /^[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;
/** An ISO 8601 date and time with no zone (not an HTTP-date; taken as one in GMT). */
const ISO_WITHOUT_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?$/;

/**
 * Parses an HTTP `Retry-After` header (RFC 9110 §10.2.3): delta-seconds or an HTTP-date, the
 * latter measured against `nowMs`. Returns milliseconds (a date in the past gives 0), or
 * `undefined` when the header is absent or malformed — a bad hint falls back to backoff.
 */
export function parseRetryAfter(header: string | null | undefined, nowMs: number): number | undefined {
  if (header === null || header === undefined) return undefined;
  const value = header.trim();
  if (value === '') return undefined;
  if (DELTA_SECONDS.test(value)) return Math.min(Number(value), MAX_DELTA_SECONDS) * 1000;
  // Only date-shaped values: Date.parse alone would also accept "5" or "2024".
  if (!/[A-Za-z]/.test(value) || !/\d{1,2}:\d{2}:\d{2}/.test(value)) return undefined;
  // HTTP-dates are GMT (RFC 9110 §5.6.7); asctime's form, and an ISO time, say no zone, which
  // Date.parse would read in this host's time zone. A leap second (:60), which Date.parse reads as
  // second 0 or another year, is taken as the second before it.
  const date = value.replace(/(\d{2}:\d{2}):60(?!\d)/, '$1:59');
  const at = Date.parse(ASCTIME.test(date) ? `${date} GMT` : ISO_WITHOUT_ZONE.test(date) ? `${date}Z` : date);
  if (Number.isNaN(at)) return undefined;
  // Whole milliseconds (rounded up: never before the date), whatever `nowMs` carries.
  return Math.max(0, Math.ceil(at - nowMs));
}
