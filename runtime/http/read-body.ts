// Streams a uWS request body into one Buffer, enforcing a byte cap as chunks arrive.
// uWS hands out chunks that are only valid inside the callback, so each is copied.

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
  /** Counts `bytes` more against the server's budget for buffered bodies; false when it is spent. */
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
    const chunks: Buffer[] = [];
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
      size += chunk.byteLength;
      if (size > limit) return fail(new BodyTooLargeError(limit));
      if (!reserve(chunk.byteLength)) return fail(new ServerBusyError());
      // uWS reuses the chunk's memory once this callback returns: one copy keeps it (Buffer.from of a Uint8Array would copy twice).
      chunks.push(Buffer.from(chunk.slice(0)));
      if (isLast) {
        clearTimeout(deadline);
        resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
      } else {
        deadline ??= setTimeout(() => fail(new BodyTimeoutError(timeoutMs)), timeoutMs);
      }
    });
  });
}
