// A request whose body may be read only while its handler runs synchronously, up to its first
// await. The org's share of large bodies (large-body-share.ts) counts that part of a handler as the
// time its body took to read; a handler that read its body later would parse it uncounted. Rather
// than trust every route to remember, the server hands such handlers this request: once the handler
// has returned (its promise, at its first await), reading `body` throws, and the request fails with
// a 500 that names the route, in the first test that sends it a body.

import type { HttpRequest, RequestHead } from './types.ts';

/** Thrown when a handler reads its request body after its first await. */
export class BodyReadLateError extends Error {
  constructor(path: string) {
    super(`the handler of ${path} read its request body after its first await; read it before (large-body-share.ts counts only that part)`);
  }
}

export interface BodyReadWindow {
  readonly request: HttpRequest;
  /** Called once the handler returned: from then on, reading the body throws BodyReadLateError. */
  close(): void;
}

export function bodyReadWindow(head: RequestHead, body: Buffer): BodyReadWindow {
  let open = true;
  const request = Object.defineProperty({ ...head }, 'body', {
    enumerable: true,
    get(): Buffer {
      if (!open) throw new BodyReadLateError(head.path);
      return body;
    },
  }) as HttpRequest;
  return { request, close: () => (open = false) };
}
