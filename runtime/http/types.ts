// The transport-neutral request and reply that every handler sees.
// The uWS adapter (server.ts) is the only code that touches uWebSockets.js request objects.

import { stringifyWithRaw } from '../validation/raw-json.ts';

/** Everything of a request but its body: what is known before the body is read. */
export type RequestHead = Omit<HttpRequest, 'body'>;

export interface HttpRequest {
  readonly method: string;
  /** Decoded path, without the query string. */
  readonly path: string;
  readonly query: URLSearchParams;
  /** Lower-cased header names; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  /** Decoded path parameters of the matched route. */
  readonly params: Readonly<Record<string, string>>;
  /** The exact raw body bytes (what signatures are computed over). */
  readonly body: Buffer;
}

export interface HttpReply {
  readonly status: number;
  /** A JSON value to serialize, or raw bytes/text sent as is. Omitted for 204. */
  readonly json?: unknown;
  readonly text?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export type Handler = (request: HttpRequest) => HttpReply | Promise<HttpReply>;

export interface Route {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Pattern with `:name` segments, e.g. `/organizations/:org_id/sources/:name`. */
  readonly pattern: string;
  /** Largest body accepted, in bytes; may depend on the path params (per-source caps). */
  readonly bodyLimit?: (params: Readonly<Record<string, string>>) => number;
  /**
   * Runs before the body is read and may throw (401, 404): a route that takes large bodies checks
   * its caller first, so nobody can make the server buffer megabytes without being allowed to.
   */
  readonly beforeBody?: (head: RequestHead) => void;
  /** Told why a request was refused before its handler ran (`beforeBody`, or the body read: 413, 408, 503). */
  readonly onRefused?: (error: unknown) => void;
  /**
   * Query parameters a write (POST, PUT, PATCH, DELETE) takes; any other is refused with 400 before
   * the body is read (default: none). `any` lets every one through, for URLs that callers outside
   * Sluice build. A GET without a list is checked against what its handler read (read-query.ts),
   * once it answered; a GET that can fail before reading them all (by id: a 404) declares them.
   */
  readonly query?: readonly string[] | 'any';
  /** Name used for the latency metric; defaults to the pattern. */
  readonly metricName?: string;
  /**
   * Its handler reads a body of LARGE_BODY_BYTES or more in a thread of its own, not on the event
   * loop: such bodies are not held to the org's share of large bodies (large-body-share.ts). Other
   * handlers read their body before their first await (reading it later throws: body-read-window.ts):
   * that part of them is what the share counts.
   */
  readonly readsLargeBodiesInThread?: boolean;
  /**
   * Checks no caller and answers alike whatever org its path names (a WebSocket endpoint's plain
   * GET): charged to no org, so that no org's load (its unread answers filling its share: 503)
   * shows to a stranger who names it.
   */
  readonly namesNoTenant?: boolean;
  /** Answered while the server holds requests at boot (liveness and metrics, which read no tenant state). */
  readonly answersWhileHeld?: boolean;
  /**
   * A read whose answer may be a page of up to MAX_PAGE_BYTES (a list, the export): its org's such
   * reads are built one at a time, every org's in the event loop's shared turns (page-turns.ts).
   */
  readonly answersPages?: boolean;
  readonly handler: Handler;
}

export const json = (status: number, body: unknown, headers?: Record<string, string>): HttpReply =>
  headers === undefined ? { status, json: body } : { status, json: body, headers };

export const noContent = (): HttpReply => ({ status: 204 });

/** A JSON reply holding RawJson values (received payloads), written as their exact text. */
export const rawJson = (status: number, body: unknown, headers?: Record<string, string>): HttpReply => ({
  status,
  text: stringifyWithRaw(body),
  headers: { ...headers, 'content-type': 'application/json' },
});
