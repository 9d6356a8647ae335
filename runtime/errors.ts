// The one error family of Sluice: a stable snake_case `code` (the same the API returns),
// an HTTP status, an optional `field`, and subclasses named by what the caller should do.

export interface ErrorBody {
  readonly error: { readonly code: string; readonly message: string; readonly field?: string };
}

export interface SluiceErrorOptions {
  readonly field?: string;
  readonly cause?: unknown;
}

/** Base error. `message` is a human sentence safe to show to API callers: never a secret or a stack. */
export class SluiceError extends Error {
  readonly code: string;
  readonly status: number;
  readonly field: string | undefined;

  constructor(status: number, code: string, message: string, options: SluiceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.field = options.field;
  }

  toBody(): ErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.field === undefined ? {} : { field: this.field }),
      },
    };
  }
}

/** The request itself is wrong (4xx); retrying the same request will fail the same way. */
export class InputError extends SluiceError {}

/** The caller is not allowed (401/403/404-for-other-tenants). */
export class AccessError extends SluiceError {}

/** The target already exists or the state forbids the change (409). */
export class ConflictError extends SluiceError {
  readonly details: Readonly<Record<string, unknown>>;
  constructor(code: string, message: string, details: Readonly<Record<string, unknown>> = {}, options: SluiceErrorOptions = {}) {
    super(409, code, message, options);
    this.details = details;
  }
}

/** A transient failure: try again after `retryAfterMs`. */
export class RetryableError extends SluiceError {
  readonly retryAfterMs: number | undefined;
  constructor(code: string, message: string, retryAfterMs?: number, options: SluiceErrorOptions = {}) {
    super(503, code, message, options);
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * The Retry-After header value (whole seconds, at least 1) of an error that says when to try again
 * (a `retryAfterMs`: RetryableError, a quota, a body budget); undefined for one that does not.
 */
export function retryAfterHeader(error: SluiceError): string | undefined {
  const retryAfterMs = retryAfterMsOf(error);
  return retryAfterMs === undefined ? undefined : String(Math.max(1, Math.ceil(retryAfterMs / 1000)));
}

/**
 * How soon a write refused while a deletion is being written (an org's mark, a source's delete) may
 * be sent again: the deletion takes one commit, and should it fail, what is sent again is taken.
 */
export const DELETION_PENDING_RETRY_MS = 1000;

/** How long an error says to wait before trying again (its `retryAfterMs`), if it says. */
export function retryAfterMsOf(error: SluiceError): number | undefined {
  const retryAfterMs = (error as { retryAfterMs?: unknown }).retryAfterMs;
  return typeof retryAfterMs === 'number' ? retryAfterMs : undefined;
}

/**
 * The answer to a write whose commit failed (a full disk, an I/O error): nothing of `what` (the
 * request, the message) was kept, and it may succeed if sent again; retryable after 5 s.
 */
export const writeFailedError = (what: string): RetryableError =>
  new RetryableError('write_failed', `The ${what} could not be stored: its write failed (the disk may be full). Nothing of it was kept; try again later.`, 5000);

/** A failure that must not be retried: the run fails with this reason. */
export class TerminalError extends SluiceError {
  constructor(code: string, message: string, options: SluiceErrorOptions = {}) {
    super(422, code, message, options);
  }
}

export const badRequest = (code: string, message: string, field?: string): InputError =>
  new InputError(400, code, message, field === undefined ? {} : { field });

export const notFound = (what: string, field?: string): AccessError =>
  new AccessError(404, 'not_found', `${what} was not found.`, field === undefined ? {} : { field });
