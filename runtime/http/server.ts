// The uWebSockets.js adapter: turns uWS requests into HttpRequest, routes them, writes replies.
// Owns listening, the in-flight count, and graceful shutdown (stop accepting, finish what is in flight).

import uws from 'uWebSockets.js';
import type { HttpResponse, HttpRequest as UwsRequest, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { ConflictError, RetryableError, retryAfterHeader, SluiceError } from '../errors.ts';
import { throttledStrays } from '../../hook-runner/lmdb-commit-failure.ts';
import { failedWriteError } from '../ledger/commit-failure-guard.ts';
import type { Logger } from '../log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import { BodyBudget, defaultBodyBudgetBytes, type BodyReservation } from './body-budget.ts';
import { bodyReadWindow } from './body-read-window.ts';
import { LARGE_BODY_BYTES, LargeBodyShare } from './large-body-share.ts';
import { headBytes, headersTooLarge, MAX_HEADER_BYTES } from './header-cap.ts';
import { readBody } from './read-body.ts';
import { assertChunkedTransfer, assertIdentityEncoding, assertNoBody, parseContentLength } from './request-framing.ts';
import { ReadQuery } from './read-query.ts';
import { MethodNotAllowedError, Router } from './router.ts';
import { refuseHandshakeWithEmptySegment } from './upgrade-required.ts';
import type { HttpReply, RequestHead, Route } from './types.ts';
import { unreadRepliesError, UnsentReplies } from './unsent-replies.ts';
import { listenFailureReason } from './listen-failure.ts';
import { PageTurns } from './page-turns.ts';
import { INTERNAL_ERROR, renderReply, writeReply, type RenderedReply } from './reply-writer.ts';

const DEFAULT_BODY_LIMIT = 1024 * 1024;
const EMPTY_BODY = Buffer.alloc(0);
/** A body that does not arrive in one piece must be complete this long after its first piece. */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;
/**
 * How long a stop waits for bodies still arriving before it cuts them off (503 stopping, nothing
 * stored): one client trickling a body would otherwise hold the stop for the whole body timeout.
 */
export const DEFAULT_STOP_BODY_GRACE_MS = 5_000;

export interface HttpServerOptions {
  readonly logger: Logger;
  readonly metrics: RuntimeMetrics;
  /**
   * Bytes of request bodies held at once, across all requests (uWS accepts any number of
   * connections, and each may send up to its route's body limit before anything answers it); past
   * it a request gets 503 server_busy. Default: defaultBodyBudgetBytes (body-budget.ts).
   */
  readonly bodyBudgetBytes?: number;
  /** The share of it the requests of one org may hold (default: an eighth). */
  readonly bodyBudgetPerTenantBytes?: number;
  /** Past it, a body still arriving is cut off with 408 body_timeout. */
  readonly bodyTimeoutMs?: number;
  /** How long into a stop bodies still arriving are waited for (DEFAULT_STOP_BODY_GRACE_MS). */
  readonly stopBodyGraceMs?: number;
  /** Bytes of reply bodies not yet read by their clients held at once (unsent-replies.ts), and one org's share (default: an eighth). */
  readonly unsentReplyBytes?: number;
  readonly unsentReplyPerTenantBytes?: number;
  /** How fast one org's large bodies are read on the event loop (large-body-share.ts); default: its defaults. */
  readonly largeBodies?: LargeBodyShare;
  /** The milliseconds log lines are rate-limited by; default the monotonic clock (a test passes its mocked Date's). */
  readonly logClock?: () => number;
}

export class HttpServer {
  readonly app: TemplatedApp;
  readonly #router = new Router();
  readonly #logger: Logger;
  readonly #metrics: RuntimeMetrics;
  #listenSocket: us_listen_socket | undefined;
  #inFlight = 0;
  /** close() was called: new requests are answered 503 (SHUTTING_DOWN). */
  #closing = false;
  #drained: (() => void) | undefined;
  #held: Promise<void> | undefined;
  #port = 0;
  readonly #bodyBudget: BodyBudget;
  readonly #unsent: UnsentReplies;
  /** Each org's reads that answer pages, one at a time, a turn each (page-turns.ts). */
  readonly #pageTurns = new PageTurns();
  readonly #largeBodies: LargeBodyShare;
  readonly #bodyTimeoutMs: number;
  readonly #stopBodyGraceMs: number;
  /**
   * An error no handler expected is a bug: logged with its route, one line per 10 s with how many
   * were held back (one per request would let any client that finds one flood the log).
   */
  readonly #unhandled: (fields: { readonly route: string; readonly error: string }) => void;
  /** The body reads under way (and large bodies waiting for their turn), each by the function that cuts it off. */
  readonly #bodyReads = new Set<(error: Error) => void>();

  constructor(options: HttpServerOptions) {
    this.app = uws.App();
    this.#logger = options.logger;
    this.#metrics = options.metrics;
    this.#bodyBudget = new BodyBudget(options.bodyBudgetBytes ?? defaultBodyBudgetBytes(), options.bodyBudgetPerTenantBytes);
    this.#unsent = new UnsentReplies(options.unsentReplyBytes, options.unsentReplyPerTenantBytes);
    this.#largeBodies = options.largeBodies ?? new LargeBodyShare();
    this.#bodyTimeoutMs = options.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS;
    this.#stopBodyGraceMs = options.stopBodyGraceMs ?? DEFAULT_STOP_BODY_GRACE_MS;
    this.#unhandled = throttledStrays(
      (fields, heldBack) => this.#logger.error('unhandled error in request handler', { ...fields, ...(heldBack > 0 ? { held_back: heldBack } : {}) }),
      options.logClock,
    );
  }

  /** Registers routes; call before `listen`. */
  addRoutes(...routes: Route[]): void {
    this.#router.add(...routes);
  }

  /**
   * Requests that arrive before `ready` settles are read but handled only after it: the runtime
   * listens (it needs its port) before boot recovery has committed, and no handler may act on a
   * run that recovery is about to rewrite.
   */
  holdRequestsUntil(ready: Promise<unknown>): void {
    const held: Promise<void> = ready.then(
      () => undefined,
      () => undefined,
    );
    this.#held = held;
    void held.then(() => {
      if (this.#held === held) this.#held = undefined;
    });
  }

  get port(): number {
    return this.#port;
  }

  /** Registers the catch-all HTTP handler and listens; resolves with the bound port. */
  listen(host: string, port: number): Promise<number> {
    this.app.any('/*', (res, req) => this.#handle(res, req));
    // Exclusive: uSockets sets SO_REUSEPORT by default, so a second Sluice on a taken port would
    // listen beside the first and the kernel would split requests between two data dirs.
    // (The 20.30 typings lack this overload of listen; the binding has it.)
    const listenExclusive = this.app.listen as unknown as (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => void;
    return new Promise((resolve, reject) => {
      listenExclusive.call(this.app, host, port, LISTEN_EXCLUSIVE_PORT, (socket) => {
        if (socket === false) {
          void listenFailureReason(host, port).then((reason) => reject(new Error(`could not listen on ${host}:${port}${reason === undefined ? '' : ` (${reason})`}`)));
          return;
        }
        this.#listenSocket = socket;
        this.#port = uws.us_socket_local_port(socket as unknown as uws.us_socket);
        resolve(this.#port);
      });
    });
  }

  /** Forgets what the org's page reads answered (a deleted org). */
  forgetOrg(orgId: string): void {
    this.#pageTurns.forget(orgId);
  }

  /**
   * Takes no more: new connections are refused, a request arriving on an open one is answered 503
   * (SHUTTING_DOWN), and every answer from now on closes its connection. A stop calls it first, long
   * before close() (answers written meanwhile without it kept their connections, and the clients'
   * next requests on them met the drop: a reset).
   */
  stopAccepting(): void {
    this.#closing = true;
    if (this.#listenSocket !== undefined) uws.us_listen_socket_close(this.#listenSocket);
    this.#listenSocket = undefined;
  }

  /**
   * Stops accepting connections, resolves once every in-flight request has been answered, then drops
   * idle connections. A request that arrives meanwhile on an open connection is answered 503 and
   * its connection closed, rather than reset with the rest when they are dropped.
   */
  async close(): Promise<void> {
    this.stopAccepting();
    const cutOffLateBodies = setTimeout(() => {
      for (const cut of this.#bodyReads) cut(new RetryableError('stopping', 'Sluice is stopping and the request body had not arrived; send it again in a few seconds.', 2000));
    }, this.#stopBodyGraceMs);
    if (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
    clearTimeout(cutOffLateBodies);
    // A turn later: the last answer may have been written inside a uWS callback (a body that failed
    // to parse is answered where its last chunk arrives), and is sent once that callback returns.
    await new Promise((resolve) => setImmediate(resolve));
    // Present at runtime in uWS 20.30 but missing from its typings: closes idle keep-alive sockets too.
    (this.app as unknown as { close(): void }).close();
  }

  #handle(res: HttpResponse, req: UwsRequest): void {
    if (this.#closing) {
      writeReply(res, this.#render(this.#errorReply(SHUTTING_DOWN)), false, true);
      return;
    }
    const started = performance.now();
    const method = req.getCaseSensitiveMethod().toUpperCase();
    const rawUrl = req.getUrl();
    const rawQuery = req.getQuery() ?? '';
    const query = new ReadQuery(rawQuery);
    // No prototype: a header named `constructor` (or any Object member) is a header like any other.
    const headers: Record<string, string> = Object.create(null) as Record<string, string>;
    const headerBytes = headBytes(req, (key, value) => {
      headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`;
    });
    // Where the request ends, checked first, whatever it is (a GET, one its key or path refuses): with
    // two Content-Lengths (or an empty one) the uWS parser frames the body by the first, and a proxy
    // in front may by the other. The connection is closed at once, unanswered: uWS parses on what it
    // has read as soon as this handler returns, and an answer with Connection: close still let it
    // serve the bytes after the head as the next request (smuggled); closing after an answer lost it.
    try {
      parseContentLength(headers['content-length']);
    } catch {
      res.close();
      return;
    }
    let aborted = false;
    let abortBodyRead: (() => void) | undefined;
    // Gives back a reply's unread bytes should its client go before reading them (unsent-replies.ts).
    let releaseUnsent: (() => void) | undefined;
    // The org the path names, once it is matched: its share of the body and reply budgets.
    let tenant = '';
    res.onAborted(() => {
      aborted = true;
      abortBodyRead?.();
      releaseUnsent?.();
    });
    this.#inFlight++;
    let metricName = 'unmatched';
    // A read that answers a page (Route `answersPages`): built in its org's page turn (page-turns.ts).
    let pages = false;
    // Its path and query, what its answer's size is remembered by (set only for such a read).
    let pageRequest = '';
    let reservation: BodyReservation | undefined;
    const finish = (reply: HttpReply): void => {
      reservation?.release();
      let rendered = this.#render(reply);
      // A page's bytes, counted once (up to ~20 ms for 16 MiB of two-byte text): checked against
      // the share and remembered in bytes, as the share counts: characters undercount UTF-8 text (a
      // page of "é" passed admission at half its size, was built, and only then refused).
      const pageBytes = pages && rendered.status === 200 ? (rendered.body === undefined ? 0 : Buffer.byteLength(rendered.body)) : undefined;
      // A read's large answer that its org's unread answers leave no room for is refused instead
      // (reads change nothing): requests admitted together would each add theirs past the share.
      if (method === 'GET' && rendered.status === 200 && !this.#unsent.mayHold(tenant, rendered.body, pageBytes)) rendered = this.#render(this.#errorReply(unreadRepliesError()));
      else if (pageBytes !== undefined) this.#pageTurns.answered(tenant, pageRequest, pageBytes);
      this.#metrics.httpRequestSeconds.observe(
        { route: metricName, method, status: String(rendered.status) },
        (performance.now() - started) / 1000,
      );
      // Answered during a stop: the connection closes after it, so the client sends no request on it
      // that would meet it being dropped (a reset, where an idle connection's next request gets the 503).
      if (!aborted) releaseUnsent = writeReply(res, rendered, method === 'HEAD', this.#closing, (body) => this.#unsent.send(res, body, tenant));
      if (--this.#inFlight === 0 && this.#drained !== undefined) this.#drained();
    };
    const run = async (): Promise<HttpReply> => {
      let segments: string[];
      let matched: ReturnType<Router['match']>;
      try {
        refuseHandshakeWithEmptySegment(rawUrl, headers);
        segments = Router.decodePath(rawUrl);
        // HEAD is answered as GET, without the body.
        matched = this.#router.match(method === 'HEAD' ? 'GET' : method, segments);
      } catch (error) {
        // Too large a head is said as such whatever its path names: a 431, not a 404 or 405.
        if (headerBytes > MAX_HEADER_BYTES) throw headersTooLarge();
        throw error;
      }
      const { route, params } = matched;
      tenant = route.namesNoTenant === true ? '' : (params.org_id ?? '');
      metricName = route.metricName ?? route.pattern;
      const path = `/${segments.join('/')}`;
      const head: RequestHead = { method, path, query, headers, params };
      let body: Buffer = EMPTY_BODY;
      const reads = method === 'GET' || method === 'HEAD';
      try {
        // Inside, so a route hears of these refusals too (the ingest counter counts every delivery).
        if (headerBytes > MAX_HEADER_BYTES) throw headersTooLarge();
        // The caller first (authenticate-first.ts: no key is a 401, whatever the query); then the query:
        // a URL a provider was given may repeat a parameter of its own (`query: 'any'`).
        route.beforeBody?.(head);
        // Its org's clients leave unread answers as large as its share: no more until they read
        // (after the caller's check: a stranger learns nothing of an org's load).
        if (route.answersWhileHeld !== true && !this.#unsent.hasRoom(tenant)) throw unreadRepliesError();
        if (route.query !== 'any') query.assertNoRepeats();
        // A GET that declares its parameters is checked here too: one that can fail before reading them
        // all (a 404 by id) would otherwise answer a typo (`?enviroment=`) with "not found".
        if (route.query !== 'any' && (!reads || route.query !== undefined)) query.assertOnly(route.query ?? []);
        // A DELETE takes no body: one sent with a body is refused, not quietly done without it.
        if (method === 'DELETE') assertNoBody(headers);
        if (!reads && method !== 'DELETE') {
          assertIdentityEncoding(headers['content-encoding']);
          assertChunkedTransfer(headers['transfer-encoding']);
          reservation = this.#bodyBudget.open(tenant);
          let cutBodyRead: ((error: Error) => void) | undefined;
          body = await readBody(res, {
            limit: route.bodyLimit?.(params) ?? DEFAULT_BODY_LIMIT,
            declaredLength: parseContentLength(headers['content-length']),
            whenAborted: (abort) => (abortBodyRead = abort),
            reserve: reservation.take,
            timeoutMs: this.#bodyTimeoutMs,
            whenCutOff: (cut) => this.#bodyReads.add((cutBodyRead = cut)),
          }).finally(() => {
            if (cutBodyRead !== undefined) this.#bodyReads.delete(cutBodyRead);
          });
        }
      } catch (error) {
        route.onRefused?.(error);
        throw error;
      }
      // After the body: uWS hands out body chunks only to a handler attached before the first await.
      if (this.#held !== undefined && route.answersWhileHeld !== true) await this.#held;
      const handle = (): HttpReply | Promise<HttpReply> => (route.readsLargeBodiesInThread === true ? route.handler({ ...head, body }) : this.#readingBodyFirst(route, head, body, tenant));
      pages = route.answersPages === true && reads;
      if (pages) pageRequest = `${rawUrl}?${rawQuery}`;
      const admitPage = (lastAnswerBytes: number): void => {
        // Checked again in its turn: a key revoked while it waited is a 401, as it was before.
        route.beforeBody?.(head);
        // A client gone while its page waited its turn: not built (its answer would not be written).
        if (aborted || !this.#unsent.hasRoomFor(tenant, Math.max(1, lastAnswerBytes))) throw unreadRepliesError();
      };
      const reply = await (pages ? this.#pageTurns.run(tenant, pageRequest, admitPage, handle) : handle());
      if (reads && route.query === undefined) query.assertAllAsked();
      return reply;
    };
    run().then(finish, (error: unknown) => finish(this.#errorReply(error, metricName)));
  }

  /**
   * Runs the handler of a route that reads its body on the event loop: only before its first await
   * (body-read-window.ts), and a large body in its org's turn.
   */
  #readingBodyFirst(route: Route, head: RequestHead, body: Buffer, tenant: string): HttpReply | Promise<HttpReply> {
    const window = bodyReadWindow(head, body);
    const handle = (): HttpReply | Promise<HttpReply> => {
      try {
        return route.handler(window.request);
      } finally {
        window.close();
      }
    };
    return body.length >= LARGE_BODY_BYTES ? this.#inLargeBodyTurn(tenant, handle) : handle();
  }

  /**
   * Runs `handle` (a handler given a large body) in its org's turn (LargeBodyShare: 429 when the
   * wait would be too long), and tells the share how long its part before its first await took:
   * where it reads the body. A stop cuts the wait off as it does a body still arriving.
   */
  async #inLargeBodyTurn(tenant: string, handle: () => HttpReply | Promise<HttpReply>): Promise<HttpReply> {
    let cut: ((error: Error) => void) | undefined;
    try {
      await this.#largeBodies.turn(tenant, (cutOff) => this.#bodyReads.add((cut = cutOff)));
    } finally {
      if (cut !== undefined) this.#bodyReads.delete(cut);
    }
    const began = performance.now();
    try {
      return handle();
    } finally {
      this.#largeBodies.done(tenant, performance.now() - began);
    }
  }

  /** The reply with its body serialized; a reply that cannot be serialized becomes a 500, never a thrown error. */
  #render(reply: HttpReply): RenderedReply {
    try {
      return renderReply(reply);
    } catch (error) {
      this.#logger.error('could not serialize a reply', { status: reply.status, error: error instanceof Error ? error.message : String(error) });
      return renderReply(INTERNAL_ERROR);
    }
  }

  /** The answer to a request that failed with `error`; `route` names it in the log line of an unexpected error. */
  #errorReply(error: unknown, route = 'unmatched'): HttpReply {
    if (error instanceof ConflictError) {
      const body = error.toBody();
      return { status: 409, json: { error: { ...body.error, ...error.details } } };
    }
    if (error instanceof SluiceError) {
      const retryAfter = retryAfterHeader(error);
      const headers = {
        ...(retryAfter === undefined ? {} : { 'retry-after': retryAfter }),
        ...(error instanceof MethodNotAllowedError ? { allow: error.allow } : {}),
        // Every 426 here is a WebSocket endpoint asked for without the handshake (upgrade-required.ts).
        ...(error.status === 426 ? { upgrade: 'websocket' } : {}),
      };
      return Object.keys(headers).length === 0 ? { status: error.status, json: error.toBody() } : { status: error.status, json: error.toBody(), headers };
    }
    // A commit that failed (a full disk, an I/O error) or that the disk floor refused stored nothing
    // of this request: worth trying again. One that took but could not be synced may be stored.
    const failedWrite = failedWriteError('request', error);
    if (failedWrite !== undefined) {
      // The process-wide guard logs the commit's failure (a sync fails only after one), rate-limited
      // (commit-failure-guard.ts): one line per request would flood the log of a full disk.
      this.#logger.debug(`a request failed: its write ${failedWrite.code === 'write_unconfirmed' ? 'could not be confirmed on disk' : 'could not be committed'}`, { error: (error as Error).message });
      return this.#errorReply(failedWrite);
    }
    this.#unhandled({ route, error: error instanceof Error ? error.message : String(error) });
    return INTERNAL_ERROR;
  }
}

/** uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT (the binding exports it; the 20.30 typings declare it only as a const enum member). */
const LISTEN_EXCLUSIVE_PORT = (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;

/** What a request that arrives while the server shuts down is answered. */
const SHUTTING_DOWN = new RetryableError('shutting_down', 'Sluice is shutting down and takes no new requests: send this one again in a moment (nothing of it was stored).', 1000);
