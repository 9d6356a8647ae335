// Streams a uWS request body into one Buffer, enforcing a byte cap as chunks arrive.
// uWS hands out chunks that are only valid inside the callback, so each is copied: into one buffer
// that doubles as it fills (up to the declared length), whose size is what the body budget counts.
// A Buffer per piece cost ten times its bytes for a body sent in 32-byte pieces; taking the declared
// length at the first piece would let a sender that declares much and sends little hold a share.

import type { HttpResponse } from 'uWebSockets.js';
import { SluiceError } from '../errors.ts';

export class BodyTooLargeError extends SluiceError {
  constructor(limit: number) {
    super(413, 'payload_too_large', `The request body exceeds the limit of ${limit} bytes.`);
  }
}

/** The client went away before sending the whole body; nobody is left to answer. */
export class RequestAbortedError extends SluiceError {
  constructor() {
    super(400, 'request_aborted', 'The client closed the connection before sending the whole body.');
  }
}

/** The client did not send its whole body in time: it held a share of the body budget meanwhile. */
export class BodyTimeoutError extends SluiceError {
  constructor(timeoutMs: number) {
    super(408, 'body_timeout', `The request body did not arrive within ${timeoutMs / 1000} seconds.`);
  }
}

/** The server holds more request bodies in memory than it allows itself: try again shortly. */
export class ServerBusyError extends SluiceError {
  readonly retryAfterMs = 1000;
  constructor() {
    super(503, 'server_busy', 'The server is holding as many request bodies as it allows; try again shortly.');
  }
}

export interface BodyReadOptions {
  /** Largest body accepted, in bytes. */
  readonly limit: number;
  /** The request's Content-Length, when it gave one. */
  readonly declaredLength: number | undefined;
  /**
   * Hands over the function that fails this read: uWS allows one `onAborted` handler, registered
   * by the caller before any async work, and a read that never settled would keep the request in
   * flight forever and graceful shutdown waiting for it.
   */
  readonly whenAborted: (abort: () => void) => void;
  /** Counts `bytes` more against the server's budget for buffered bodies (the memory taken); false when it is spent. */
  readonly reserve: (bytes: number) => boolean;
  /** How long a body that does not come in one piece may take, from its first piece. */
  readonly timeoutMs: number;
  /** Hands over the function that fails this read with the error given (the server stopping cuts slow bodies off). */
  readonly whenCutOff?: (cut: (error: Error) => void) => void;
}

/**
 * Resolves with the whole body; rejects with BodyTooLargeError as soon as the cap is passed, with
 * ServerBusyError when the server's budget for buffered bodies is spent, and with
 * RequestAbortedError when the client goes away.
 */
export function readBody(res: HttpResponse, { limit, declaredLength, whenAborted, reserve, timeoutMs, whenCutOff }: BodyReadOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (declaredLength !== undefined && declaredLength > limit) {
      reject(new BodyTooLargeError(limit));
      return;
    }
    let body: Buffer | undefined;
    let size = 0;
    let failed = false;
    // Only for bodies that come in pieces: most arrive with their headers, and need no timer.
    let deadline: NodeJS.Timeout | undefined;
    const fail = (error: Error): void => {
      failed = true;
      clearTimeout(deadline);
      reject(error);
    };
    whenAborted(() => fail(new RequestAbortedError()));
    whenCutOff?.((error) => {
      if (!failed) fail(error);
    });
    res.onData((chunk, isLast) => {
      if (failed) return;
      const needed = size + chunk.byteLength;
      if (needed > limit) return fail(new BodyTooLargeError(limit));
      if (body === undefined || needed > body.byteLength) {
        const capacity = body === undefined && isLast ? needed : grownCapacity(body?.byteLength ?? 0, needed, declaredLength, limit);
        if (!reserve(capacity - (body?.byteLength ?? 0))) return fail(new ServerBusyError());
        const grown = Buffer.allocUnsafe(capacity);
        body?.copy(grown, 0, 0, size);
        body = grown;
      }
      // uWS reuses the chunk's memory once this callback returns: copied now.
      body.set(new Uint8Array(chunk), size);
      size = needed;
      if (isLast) {
        clearTimeout(deadline);
        resolve(size === body.byteLength ? body : body.subarray(0, size));
      } else {
        deadline ??= setTimeout(() => fail(new BodyTimeoutError(timeoutMs)), timeoutMs);
      }
    });
  });
}

/** The buffer of a body that comes in pieces starts this large (or as large as its first piece). */
const FIRST_CAPACITY = 1024;

/** The next size of a body's buffer that must hold `needed` bytes: double, within the declared length and the cap. */
function grownCapacity(current: number, needed: number, declaredLength: number | undefined, limit: number): number {
  const doubled = Math.max(needed, current === 0 ? FIRST_CAPACITY : current * 2);
  return Math.max(needed, Math.min(doubled, declaredLength ?? limit, limit));
}
