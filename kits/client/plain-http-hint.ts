// An https:// or wss:// url whose server speaks plain HTTP (as Sluice does, unless TLS is put in
// front of it) fails in the TLS handshake in words that do not say so: the server waits for a
// request line that never comes (a connect or open timeout), closes on the TLS hello ("disconnected
// before secure TLS connection"), or answers it in HTTP (OpenSSL's "wrong version number"). Such
// a failure gets a hint naming the likely cause; the API, live and device clients ask such a
// server in plain HTTP once (answeredInPlainHttp, PlainHttpCheck), and stop when Sluice answers.

import { answerText } from './answer-body.ts';
import { parseBaseUrl, urlUnder } from './endpoint-url.ts';
import type { SocketEnd } from './socket-run.ts';

/** How long the plain-HTTP check of an https url whose TLS hello went unanswered waits. */
export const PLAIN_HTTP_CHECK_MS = 3_000;
/** Bytes of a liveness answer read at most: Sluice's is `{"status":"ok"}`. */
const LIVENESS_BYTES = 4096;

/** The server answered the TLS hello in HTTP: it does not speak TLS. */
const ANSWERED_IN_HTTP = /ERR_SSL_WRONG_VERSION_NUMBER|wrong version number/i;
/**
 * The server closed on the hello (Sluice's uWS does, after its idle timeout), or gave it no answer
 * in time: also what a TLS server restarting or overloaded, or one out of reach, does.
 */
const CLOSED_OR_SILENT = /before secure TLS connection|UND_ERR_CONNECT_TIMEOUT|Connect Timeout/i;

const isSecure = (url: URL): boolean => url.protocol === 'https:' || url.protocol === 'wss:';

/**
 * Whether `failure` (at an https:// or wss:// url; `timedOut`: no answer in time) is a TLS hello
 * closed or left unanswered, as a plain-HTTP server does it but also a TLS server restarting: worth
 * asking the server in plain HTTP (api-client.ts) before trying again.
 */
export const mayBePlainHttp = (url: URL, failure: string, timedOut: boolean): boolean => isSecure(url) && (timedOut || CLOSED_OR_SILENT.test(failure));

/** Whether `failure` (at an https:// or wss:// url) says the server answered the TLS hello as no TLS server would: trying again cannot help. */
export const answeredWithoutTls = (url: URL, failure: string): boolean => isSecure(url) && ANSWERED_IN_HTTP.test(failure);

/**
 * A sentence to add to `failure` (what the connection failed with; `timedOut`: the opening had no
 * answer in time) when `url` is https:// or wss:// and the failure reads as a TLS handshake with a
 * plain-HTTP server; '' otherwise.
 */
export function plainHttpHint(url: URL, failure: string, timedOut = false): string {
  if (!mayBePlainHttp(url, failure, timedOut) && !answeredWithoutTls(url, failure)) return '';
  return plainHttpAdvice(url);
}

/**
 * The hint's sentence for `url` as its user gave it: the live client opens a wss:// url made from
 * the https:// one it was given, and its hint names the one given (`sluice watch` refuses ws://).
 */
export function plainHttpAdvice(url: URL): string {
  const plain = url.protocol === 'https:' ? 'http' : 'ws';
  return `if the server speaks plain HTTP (Sluice does unless TLS is put in front of it), use ${plain}:// instead of ${url.protocol}//`;
}

/**
 * Sluice's liveness URL under `base` (the url given, https://), asked in plain HTTP on the port the
 * TLS hello went to: its own answer there (isSluiceLiveness) means the server speaks plain HTTP.
 */
export function plainHealthzOf(base: URL, port: string): URL {
  const healthz = urlUnder(base, '/healthz', 'http');
  healthz.protocol = 'http:';
  healthz.port = port === '' ? '443' : port;
  return healthz;
}

/** Whether an answer is Sluice's own liveness answer (200 `{"status":"ok"}`). */
export const isSluiceLiveness = (status: number, text: string): boolean => status === 200 && /"status":\s*"ok"/.test(text);

/**
 * Sluice's liveness URL in plain HTTP on the https url's port, if Sluice answers it there (within
 * PLAIN_HTTP_CHECK_MS, and before `closing`): what the live and device clients ask, through the
 * global fetch, after a TLS hello at `base` failed.
 */
async function answeredInPlainHttp(base: URL, closing: AbortSignal): Promise<URL | undefined> {
  if (base.protocol !== 'https:') return undefined;
  const healthz = plainHealthzOf(base, base.port);
  // One controller held here, not AbortSignal.any([AbortSignal.timeout(), closing]): a timeout
  // signal is held only weakly by its timer, and the combined one seemed collected while the fetch
  // waited (a silent server's check once never ended in a fresh-clone run); this one cannot be.
  const ended = new AbortController();
  const timer = setTimeout(() => ended.abort(), PLAIN_HTTP_CHECK_MS);
  const onClosing = (): void => ended.abort();
  closing.addEventListener('abort', onClosing, { once: true });
  try {
    if (closing.aborted) return undefined;
    const answer = await fetch(healthz, { signal: ended.signal });
    // Sluice's liveness answer is a few bytes: a larger body is not it, and is not read whole.
    const text = await answerText(answer, LIVENESS_BYTES);
    return text !== undefined && isSluiceLiveness(answer.status, text) ? healthz : undefined;
  } catch {
    return undefined; // Nothing answering in plain HTTP either: reconnect as for any other failure.
  } finally {
    clearTimeout(timer);
    closing.removeEventListener('abort', onClosing);
  }
}

/**
 * The live and device clients' check after a TLS hello a plain-HTTP server closed or left
 * unanswered (an `unreachable` end with a hint): Sluice's liveness URL asked in plain HTTP, once per
 * client (one such failure is enough to tell), until `closing` aborts.
 */
export class PlainHttpCheck {
  #asked = false;
  readonly #closing: AbortSignal;

  constructor(closing: AbortSignal) {
    this.#closing = closing;
  }

  /** Where Sluice answered in plain HTTP, when `end` is the first such failure and it did; `url`: the url the client was given. */
  async after(end: SocketEnd, url: string): Promise<URL | undefined> {
    if (end.kind !== 'unreachable' || end.hint === undefined || this.#asked) return undefined;
    this.#asked = true;
    return answeredInPlainHttp(parseBaseUrl(url), this.#closing);
  }
}
