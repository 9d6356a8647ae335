// A reply on the wire: an HttpReply rendered once (status, headers, body text) and written to a
// uWS response in one cork, HEAD answers included.

import { STATUS_CODES } from 'node:http';
import type { HttpResponse } from 'uWebSockets.js';
import type { HttpReply } from './types.ts';

export const INTERNAL_ERROR: HttpReply = { status: 500, json: { error: { code: 'internal_error', message: 'An internal error occurred.' } } };

/** A reply ready for the wire: the status line, headers and body text are all computed. */
export interface RenderedReply {
  readonly status: number;
  readonly headers: readonly (readonly [string, string])[];
  readonly body: string | undefined;
}

/** Serializes a reply's body; throws when its JSON cannot be serialized. */
export function renderReply(reply: HttpReply): RenderedReply {
  const headers = Object.entries(reply.headers ?? {});
  if (reply.json !== undefined) return { status: reply.status, headers: [...headers, ['content-type', 'application/json']], body: JSON.stringify(reply.json) };
  if (reply.text !== undefined) {
    const typed = reply.headers?.['content-type'] !== undefined;
    return { status: reply.status, headers: typed ? headers : [...headers, ['content-type', 'text/plain; charset=utf-8']], body: reply.text };
  }
  return { status: reply.status, headers, body: undefined };
}

/**
 * `closeConnection`: the connection ends with this answer (during a stop), except a head-only one's,
 * which keeps it (see below; its next request is answered, a 503 during a stop); `send`: how a body
 * is sent (as its client reads it, unsent-replies.ts), else at once. Returns what gives back a
 * body's unread bytes should the client go first.
 */
export function writeReply(res: HttpResponse, reply: RenderedReply, headOnly: boolean, closeConnection = false, send?: (body: string) => () => void): (() => void) | undefined {
  let release: (() => void) | undefined;
  res.cork(() => {
    res.writeStatus(`${reply.status} ${STATUS_CODES[reply.status] ?? 'Unknown'}`);
    for (const [name, value] of reply.headers) res.writeHeader(name, value);
    if (headOnly) {
      // The length GET would send, as a header of ours: uWS 20.30's endWithoutBody(length) leaves the
      // response pending, and the next request on the connection then went unanswered. (Called with
      // any argument, even undefined, it writes a Content-Length of its own; and with closeConnection
      // it left the connection open, the answer pending, so a head-only answer never closes it.)
      res.writeHeader('content-length', String(reply.body === undefined ? 0 : Buffer.byteLength(reply.body)));
      res.endWithoutBody();
    } else if (send !== undefined && !closeConnection && reply.body !== undefined && reply.body.length > 0) release = send(reply.body);
    else res.end(reply.body ?? '', closeConnection);
  });
  return release;
}
