// What a REST call of the client rejects with: SluiceApiError when Sluice answered with an error,
// SluiceNetworkError when no answer came (the request may or may not have been carried out). A
// call cancelled through its `signal` rejects with the signal's reason instead, never retried.

/**
 * An answer of 4xx/5xx, with the API's error body: `{"error":{"code","message","field"?,...}}`; or
 * `invalid_answer`, a success whose body is not JSON (not Sluice answering: a POST may have been carried out).
 */
export class SluiceApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | undefined;
  /** The whole `error` object (a 409 duplicate names `original_event_id`, for instance). */
  readonly details: Readonly<Record<string, unknown>>;
  /** The answer's `Retry-After`, in ms, when it gave one in seconds (a 429 or 503 not retried, or retried to the last attempt). */
  readonly retryAfterMs: number | undefined;
  constructor(status: number, details: Readonly<Record<string, unknown>>, retryAfterMs?: number) {
    super(typeof details['message'] === 'string' ? details['message'] : `Sluice answered ${status}.`);
    this.name = 'SluiceApiError';
    this.status = status;
    this.code = typeof details['code'] === 'string' ? details['code'] : 'http_error';
    this.field = typeof details['field'] === 'string' ? details['field'] : undefined;
    this.details = details;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * An argument a call cannot send as given (an empty or "." id, an idempotency key a header cannot
 * carry): thrown before anything is sent.
 */
export class SluiceArgumentError extends TypeError {
  readonly code = 'invalid_argument';
  constructor(message: string) {
    super(message);
    this.name = 'SluiceArgumentError';
  }
}

/**
 * No answer from Sluice: the connection failed (`network_error`, `cause` is fetch's error) or an
 * attempt took longer than `timeoutMs` (`timeout`). Thrown once the attempts are used up, for a
 * call that retries. A POST that does not retry may have been carried out all the same.
 */
export class SluiceNetworkError extends Error {
  readonly code: 'network_error' | 'timeout';
  /** Attempts made, this one included. */
  readonly attempts: number;
  constructor(code: 'network_error' | 'timeout', message: string, attempts: number, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'SluiceNetworkError';
    this.code = code;
    this.attempts = attempts;
  }
}
