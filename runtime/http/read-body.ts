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

/**
 * Resolves with the whole body, rejects with BodyTooLargeError as soon as the cap is passed, and
 * with RequestAbortedError when the caller's `onAborted` handler (uWS allows one, registered before
 * any async work) calls the function handed to `whenAborted`: a read that never settles would keep
 * the request in flight forever and graceful shutdown waiting for it.
 */
export function readBody(res: HttpResponse, limit: number, declaredLength: number | undefined, whenAborted: (abort: () => void) => void): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (declaredLength !== undefined && declaredLength > limit) {
      reject(new BodyTooLargeError(limit));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    whenAborted(() => {
      failed = true;
      reject(new RequestAbortedError());
    });
    res.onData((chunk, isLast) => {
      if (failed) return;
      size += chunk.byteLength;
      if (size > limit) {
        failed = true;
        reject(new BodyTooLargeError(limit));
        return;
      }
      chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
      if (isLast) resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    });
  });
}
