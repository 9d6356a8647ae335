// One outbound HTTP(S) POST for webhook steps through a capped keep-alive pool, one deadline for
// the whole exchange (connect, send, answer, body) that starts once the pool hands the request a
// socket, no redirects followed, a capped body read and a capped count of interim (1xx) answers.
// A body still arriving at the deadline after the status line is cut off: the status decides, the
// body is only evidence. A request body still being sent when the answer came gets the step's
// timeout more to finish. A request that went out on a kept-alive connection the receiver closed
// before answering says so (PostStaleConnectionError).
// node:http instead of fetch: fetch's web streams and abort signals cost ~2x the CPU per request.

import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type Socket } from 'node:net';
import { nameLookedUp, SHUT_DOWN, type OutboundPool, type WithdrawableRequestOptions } from './outbound-connections.ts';
import { textCutAt } from '../validation/cut-text.ts';

export interface PostAnswer {
  readonly status: number;
  readonly retryAfter: string | undefined;
  /** The first `keepBytes` of the body, decoded as UTF-8 (without a character a cut split). */
  readonly text: string;
  /** Bytes received; reading stops (and the connection is dropped) past `readLimitBytes`. */
  readonly bytes: number;
  /** The receiver closed the connection before the body it announced was complete. */
  readonly cutOff: boolean;
  /** How long the request waited for a free socket; undefined when its pool had one at once. */
  readonly queuedMs: number | undefined;
}

export interface PostOptions {
  readonly headers: Readonly<Record<string, string>>;
  /**
   * Headers that must be computed when the request is sent, not when it is queued (a signature
   * over a timestamp): called once the pool hands the request a socket, with how long it waited.
   */
  readonly headersAtSend?: (waitedMs: number) => Readonly<Record<string, string>>;
  readonly body: string;
  readonly timeoutMs: number;
  readonly keepBytes: number;
  readonly readLimitBytes: number;
  /** The connection pool (see outbound-connections.ts). */
  readonly pool: OutboundPool;
  /** Milliseconds on a clock that only counts time passing, for the wait for a socket; default performance.now (a test passes its mocked Date's). */
  readonly elapsedNow?: () => number;
  /**
   * Asked once the pool hands the request a socket and again once a new connection is open, before
   * anything is written: false (the run was cancelled or deleted while the request waited for a
   * connection, or while the connection's name resolved and it opened) drops it unsent, with
   * PostWithdrawnError.
   */
  readonly stillWanted?: () => boolean;
  /**
   * Made only for a request that waits for a socket: aborted once its run no longer wants it, which
   * drops it from its queue at once, unsent (PostWithdrawnError), rather than when a socket frees.
   */
  readonly withdrawn?: () => AbortSignal;
  /** Told, when the answer came before the body was all sent, of when sending it ends (sent, or cut off). */
  readonly stillSending?: (ended: Promise<void>) => void;
  /**
   * Asked once, just before the request's first byte is written (until then nothing of it went
   * out): false drops it unsent, with PostWithdrawnError (a clean stop counted it as never sent).
   */
  readonly goingOut?: () => boolean;
}

/**
 * Where the exchange was when its deadline passed: resolving the receiver's name (`lookup`),
 * opening the connection (`connect`, TLS included), or waiting for the answer once it was open
 * (`answer`: only then can the request have reached the receiver).
 */
export type TimeoutPhase = 'lookup' | 'connect' | 'answer';

/** Thrown when the deadline passes before the exchange ends. */
export class PostTimeoutError extends Error {
  override readonly name = 'TimeoutError';

  constructor(
    message: string,
    readonly phase: TimeoutPhase = 'answer',
  ) {
    super(message);
  }
}

/** How long each failed request had waited for a connection (only those that waited). */
const waitedFor = new WeakMap<object, number>();

/** How long the request `postOnce` rejected with `error` waited for a free connection; undefined when it did not wait. */
export const queuedMsOf = (error: unknown): number | undefined => (typeof error === 'object' && error !== null ? waitedFor.get(error) : undefined);

/** Thrown when the request was dropped unsent because it was no longer wanted (PostOptions.stillWanted). */
export class PostWithdrawnError extends Error {
  override readonly name = 'PostWithdrawnError';

  constructor() {
    super('the request was withdrawn before it was sent');
  }
}

/** Thrown when the request cannot be built from the step (its headers): a retry cannot succeed. */
export class PostRequestError extends Error {
  override readonly name = 'PostRequestError';

  constructor(cause: unknown) {
    super(`the request could not be built: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/**
 * Thrown when the exchange failed before its connection was open (the name did not resolve, the
 * connection or its TLS handshake failed: a certificate refused, a host unreachable): nothing was
 * sent. `code` is the failure's own (ECONNREFUSED, EHOSTUNREACH, …).
 */
export class PostNeverConnectedError extends Error {
  override readonly name = 'PostNeverConnectedError';
  readonly code: string | undefined;

  constructor(cause: NodeJS.ErrnoException) {
    super(cause.message, { cause });
    this.code = cause.code;
  }
}

/**
 * Thrown when the connection closed (reset, or a write to a closed socket) before any answer, on a
 * kept-alive connection that had carried an earlier request, while the request was still going out
 * or within STALE_WINDOW_MS of it: most often the receiver closed it as idle just as this request
 * went out, so it never saw it (though it may have).
 */
export class PostStaleConnectionError extends Error {
  override readonly name = 'PostStaleConnectionError';
}

/**
 * How soon after the request was sent a close still reads as one that crossed it on the wire (an
 * idle close takes a round trip to show). Later, the receiver had the request: it closed while
 * handling it (a crash), which is an ordinary network error, retried after the step's backoff.
 */
const STALE_WINDOW_MS = 1000;

/** Interim (1xx) answers a request takes before its final one (a receiver sends one or two: 100 Continue, 102, 103). */
export const MAX_INTERIM_ANSWERS = 16;

/** Errors of a connection closed under a request: a reset, or a write to a closed socket. */
const CLOSED_UNDER_REQUEST = new Set(['ECONNRESET', 'EPIPE']);

/**
 * Sockets that have been handed to a request. Node's `reusedSocket` misses a socket passed on to a
 * request that waited for one (its pool at the cap), so reuse is tracked here.
 */
const carried = new WeakSet<object>();

/**
 * Posts `body` to `url`; rejects with PostTimeoutError at the deadline or with the network error.
 * Time spent waiting for a free socket in the pool is not the receiver's and is not on the clock.
 */
export function postOnce(url: URL, options: PostOptions): Promise<PostAnswer> {
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const body = Buffer.from(options.body, 'utf8');
  const { pool } = options;
  return new Promise<PostAnswer>((resolve, reject) => {
    let outgoing: ReturnType<typeof send>;
    // Asked by the org's socket share when a request that waited there gets room (set below).
    let withdrawn: () => boolean = () => false;
    const withdrawable: WithdrawableRequestOptions = { poolWithdraw: () => withdrawn() };
    try {
      outgoing = send(url, { method: 'POST', ...pool.requestOptions, ...withdrawable, headers: { ...options.headers, 'content-length': String(body.byteLength) } });
    } catch (error) {
      // A header Node refuses (a character it cannot send): retrying cannot help.
      reject(new PostRequestError(error));
      return;
    }
    // Not the wall clock: one stepped meanwhile would make the wait an hour long, or none.
    const elapsedNow = options.elapsedNow ?? (() => performance.now());
    const sentAt = elapsedNow();
    const queued = pool.isQueued(outgoing);
    let queuedMs: number | undefined;
    let timer: NodeJS.Timeout | undefined;
    let unwatch: () => void = () => undefined;
    // Settling twice is a no-op, so the first of deadline, failure, shutdown and answer wins.
    const settle = (): void => {
      clearTimeout(timer);
      release();
      unwatch();
    };
    const fail = (error: Error): void => {
      settle();
      // Ended while still waiting for a connection (withdrawn, shut down): all of its time was that wait.
      if (queued && !hasSocket) queuedMs ??= Math.max(0, elapsedNow() - sentAt);
      if (queuedMs !== undefined) waitedFor.set(error, queuedMs);
      reject(error);
    };
    let hasSocket = false;
    let reused = false;
    /**
     * How far the connection got (set once the request has a socket): only at `answer` can anything
     * have been sent. A `connect` whose name is not looked up yet is `lookup` (told at the deadline).
     */
    let phase: 'connect' | 'answer' = 'connect';
    /** When the whole request had been handed to the socket (performance.now()); undefined while it is still going out. */
    let requestSentAt: number | undefined;
    outgoing.once('finish', () => {
      requestSentAt = performance.now();
    });
    let answered: IncomingMessage | undefined;
    // Answered: the receiver took the delivery; ending its body settles with what came. True if so.
    const endAnswer = (): boolean => {
      answered?.destroy();
      return answered !== undefined;
    };
    const release = pool.untilClosed(() => {
      if (endAnswer()) return;
      fail(new Error(hasSocket ? SHUT_DOWN.inFlight : SHUT_DOWN.queued));
      outgoing.destroy();
    }, endAnswer);
    const dropUnsent = (): void => {
      fail(new PostWithdrawnError());
      outgoing.destroy();
    };
    // Dropped unsent, and true, when the run no longer wants the request.
    withdrawn = (): boolean => {
      if (stillWanted(options)) return false;
      dropUnsent();
      return true;
    };
    if (queued && options.withdrawn !== undefined) {
      const signal = options.withdrawn();
      const onAbort = (): void => {
        if (hasSocket || outgoing.destroyed || !withdrawn()) return;
        pool.drop(outgoing);
      };
      if (signal.aborted) queueMicrotask(onAbort);
      else {
        signal.addEventListener('abort', onAbort, { once: true });
        unwatch = () => signal.removeEventListener('abort', onAbort);
      }
    }
    // Headers and body go out together, once the connection is open. This runs outside the
    // promise's executor: a throw here would be uncaught and end the process, so it fails the request.
    const writeRequest = (): void => {
      if (options.goingOut?.() === false) return dropUnsent();
      try {
        for (const [name, value] of Object.entries(options.headersAtSend?.(queuedMs ?? 0) ?? {})) outgoing.setHeader(name, value);
      } catch (error) {
        fail(new PostRequestError(error));
        outgoing.destroy();
        return;
      }
      outgoing.end(body);
    };
    outgoing.once('socket', (socket: object) => {
      if (outgoing.destroyed) return;
      hasSocket = true;
      reused = carried.has(socket);
      carried.add(socket);
      if (queued) queuedMs = Math.max(0, elapsedNow() - sentAt);
      if (withdrawn()) return;
      // Only a name is looked up; the pools mark a socket whose lookup has answered (nameLookedUp).
      const named = isIP(url.hostname.replace(/^\[|\]$/g, '')) === 0;
      timer = setTimeout(() => {
        if (endAnswer()) return;
        fail(new PostTimeoutError(`no answer within ${options.timeoutMs} ms`, phase === 'connect' && named && !nameLookedUp(socket) ? 'lookup' : phase));
        outgoing.destroy();
      }, options.timeoutMs);
      // A kept-alive socket is open already; a new one is open once connected (and, for https, once
      // its TLS handshake is done). Nothing is written to a new one before then.
      phase = reused || !(socket as Socket).connecting ? 'answer' : 'connect';
      if (phase === 'answer') return writeRequest();
      (socket as Socket).once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
        phase = 'answer';
        // Asked again: the run may have been cancelled while the name resolved or the connection opened.
        if (outgoing.destroyed || withdrawn()) return;
        writeRequest();
      });
    });
    // `on`, not `once`: a request can be told of a failure more than once (a refused connection at
    // shutdown). Once answered, a failure (a reset mid-body) only ends the body: the response's
    // close settles, with the status the receiver gave, or a 2xx would be sent again.
    outgoing.on('error', (error: NodeJS.ErrnoException) => {
      if (answered !== undefined) return;
      if (phase !== 'answer') return fail(new PostNeverConnectedError(error));
      const crossed = requestSentAt === undefined || performance.now() - requestSentAt <= STALE_WINDOW_MS;
      fail(reused && crossed && CLOSED_UNDER_REQUEST.has(error.code ?? '') ? new PostStaleConnectionError(error.message) : error);
    });
    // A 101 answer (an upgrade nobody asked for) ends the exchange without a 'response' and
    // without an error: unheard, the request would wait for its deadline. So would any close
    // before an answer that reports no error. It is an answer like any other non-2xx.
    outgoing.once('upgrade', (_response: IncomingMessage, socket: { destroy(): void }) => {
      socket.destroy();
      settle();
      resolve({ status: 101, retryAfter: undefined, text: '', bytes: 0, cutOff: false, queuedMs });
    });
    // Interim (1xx) answers come before the final one, each read within Node's header cap but with
    // no cap on how many: a receiver sending them without end was read on the event loop until the
    // deadline (up to a minute, every org slowed). Past MAX_INTERIM_ANSWERS the request is given up.
    let interim = 0;
    outgoing.on('information', () => {
      if (++interim !== MAX_INTERIM_ANSWERS + 1 || answered !== undefined) return;
      fail(new Error(`the receiver sent more than ${MAX_INTERIM_ANSWERS} interim (1xx) answers before a final one`));
      outgoing.destroy();
    });
    outgoing.once('close', () => {
      if (answered === undefined) fail(new Error('the connection closed before an answer'));
    });
    outgoing.once('response', (response: IncomingMessage) => {
      answered = response;
      const kept: Buffer[] = [];
      let bytes = 0;
      response.on('data', (chunk: Buffer) => {
        if (bytes < options.keepBytes) kept.push(chunk);
        bytes += chunk.byteLength;
        if (bytes > options.readLimitBytes) response.destroy();
      });
      const retryAfter = response.headers['retry-after'];
      // The status line is the answer: a body cut off (by the receiver or the read limit) is evidence.
      response.on('error', () => undefined);
      response.once('close', () => {
        settle();
        const cutOff = !response.complete && bytes <= options.readLimitBytes;
        if (!outgoing.writableFinished) options.stillSending?.(finishSendingWithin(outgoing, options.timeoutMs));
        resolve({
          status: response.statusCode ?? 0,
          retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
          text: textCutAt(Buffer.concat(kept), options.keepBytes, bytes > options.keepBytes || !response.complete),
          bytes,
          cutOff,
          queuedMs,
        });
      });
      // Answered during a stop: settled now, while the engine records it (see holdUnsent), once the
      // parser has handed over what came with the head (ended at once, a whole body read as empty).
      if (pool.stopping()) process.nextTick(() => response.destroy());
    });
  });
}

/**
 * A receiver may answer before it has read the whole body (HTTP allows it; it may read the rest
 * afterwards). The answer stands; the body gets `timeoutMs` more to be sent, then the request is
 * ended, closing its connection: one that reads no more would otherwise hold its socket out of the
 * pool, and the body in memory, for good. Resolves when the body is sent or the request is ended.
 */
function finishSendingWithin(outgoing: ClientRequest, timeoutMs: number): Promise<void> {
  const cut = setTimeout(() => outgoing.destroy(), timeoutMs);
  cut.unref();
  return new Promise<void>((ended) => {
    const end = (): void => {
      clearTimeout(cut);
      ended();
    };
    outgoing.once('finish', end);
    outgoing.once('close', end);
  });
}

/** Whether to send after all; a check that throws (a failed read) sends: the attempt was wanted when it was made. */
function stillWanted(options: PostOptions): boolean {
  try {
    return options.stillWanted?.() !== false;
  } catch {
    return true;
  }
}
