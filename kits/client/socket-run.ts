// One WebSocket connection from open to end, as the client's live and device connections use it:
// resolves how it ended (closed with a code, refused with an HTTP status, or unreachable), and
// ends a connection that never opens or has gone silent (a half-open TCP connection, a server that
// accepts and never answers the handshake, would otherwise hang on). While open it pings the server
// now and then: Sluice closes a socket it has heard nothing from for a minute (uWS's idleTimeout),
// and its own pings wait behind whatever is queued for a client reading a long replay slowly.

import WebSocket from 'ws';
import { plainHttpHint } from './plain-http-hint.ts';
import { retryAfterMsOf } from './retry.ts';

export type SocketEnd =
  | { readonly kind: 'closed'; readonly code: number; readonly reason: string }
  | { readonly kind: 'refused'; readonly status: number; readonly body: string; readonly retryAfterMs?: number }
  /**
   * Could not connect (`cause`: the socket's error, such as `connect ECONNREFUSED 127.0.0.1:8787`),
   * or (`timedOutMs`) the handshake had no answer in time; `hint`: what to try (plain-http-hint.ts).
   */
  | { readonly kind: 'unreachable'; readonly timedOutMs?: number; readonly cause?: string; readonly hint?: string };

/** The most of a refusal's body kept for the error message. */
const MAX_REFUSAL_BODY = 1024;
/** The longest an opening handshake may take by default; a silenceMs shorter than this takes its place. */
export const OPEN_TIMEOUT_MS = 15_000;
/** How often an open socket pings the server: well inside the live rooms' 60 s idle timeout. */
export const KEEPALIVE_MS = 20_000;

/**
 * Opens `url` and resolves once the connection is over. `onMessage` sees every frame. A connection
 * not open after `openTimeoutMs` (default: silenceMs, at most 15 s) is given up (it ends
 * `unreachable`, with `timedOutMs`); once open, `silenceMs` without a frame, a ping or the answer
 * to a ping terminates it (it then ends `closed`, 1006); every `keepAliveMs` it pings the server
 * (keep it well under silenceMs: on a quiet socket the answers are all there is to hear). Throws
 * (synchronously) what `ws` throws for a URL or a subprotocol it cannot use.
 */
export function runSocket(
  url: URL,
  protocols: string[],
  onMessage: (data: Buffer) => void,
  silenceMs: number,
  openTimeoutMs: number = Math.min(silenceMs, OPEN_TIMEOUT_MS),
  keepAliveMs: number = KEEPALIVE_MS,
): { readonly socket: WebSocket; readonly ended: Promise<SocketEnd> } {
  const socket = new WebSocket(url, protocols);
  let timedOut = false;
  // Started before the handshake: a server that accepts and never answers is given up too.
  let silence: NodeJS.Timeout = setTimeout(() => {
    timedOut = true;
    socket.terminate();
  }, openTimeoutMs);
  silence.unref();
  const heard = (): void => {
    clearTimeout(silence);
    silence = setTimeout(() => socket.terminate(), silenceMs);
    silence.unref();
  };
  let keepAlive: NodeJS.Timeout | undefined;
  const ended = new Promise<SocketEnd>((resolve) => {
    const end = (outcome: SocketEnd): void => {
      clearTimeout(silence);
      clearInterval(keepAlive);
      resolve(outcome);
    };
    socket.on('unexpected-response', (request, response) => {
      // Held now: the response lets go of it once complete, and a kept-alive connection would hold
      // the process open until the server drops it.
      const connection = response.socket;
      let body = '';
      response.on('data', (chunk: Buffer) => {
        if (body.length < MAX_REFUSAL_BODY) body += chunk.toString('utf8');
      });
      // A body cut off settles too ('close' without 'end'); ws leaves aborting the request to us.
      const refused = (): void => {
        const retryAfterMs = retryAfterMsOf(response.headers['retry-after']);
        end({ kind: 'refused', status: response.statusCode ?? 0, body: body.slice(0, MAX_REFUSAL_BODY), ...(retryAfterMs === undefined ? {} : { retryAfterMs }) });
        request.destroy();
        connection.destroy();
      };
      response.on('end', refused);
      response.on('close', refused);
      response.on('error', refused);
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (socket.readyState === WebSocket.OPEN) return;
      const hint = plainHttpHint(url, `${error.message} ${error.code ?? ''}`, timedOut);
      const hinted = hint === '' ? {} : { hint };
      end(timedOut ? { kind: 'unreachable', timedOutMs: openTimeoutMs, ...hinted } : { kind: 'unreachable', cause: error.message.trim(), ...hinted });
    });
    socket.on('open', () => {
      heard();
      keepAlive = setInterval(() => socket.ping(), keepAliveMs);
      keepAlive.unref();
    });
    socket.on('ping', heard);
    // The answer to our own keep-alive: a server that hears our pings never sends its own (its
    // idle timer never runs out), so a quiet connection otherwise looked dead after silenceMs.
    socket.on('pong', heard);
    socket.on('message', (data: Buffer) => {
      heard();
      onMessage(data);
    });
    socket.on('close', (code, reason) => end({ kind: 'closed', code, reason: reason.toString() }));
  });
  return { socket, ended };
}
