// Watching runs live, with the resume rules of the live rooms done for you: the client keeps its
// position (the highest RunUpdate.seq or Heartbeat.last_seq seen), reconnects after a drop with
// that position as `after_seq` (so each update arrives once), and when the server says the log
// cannot bring it up to date (4410) or the sandbox was reset (4409) it reconnects live and asks
// the application to reload what it shows. A revoked key (4401), a deleted org (4404) or a refused
// upgrade ends it.

import { decodeLiveMessage, UnknownLiveMessageError, type LiveMessage, type RunUpdate } from '../../runtime/rooms/live-codec.ts';
import { CLOSE_KEY_REVOKED, CLOSE_ORG_DELETED, CLOSE_PROTOCOL_ERROR, CLOSE_REPLAY_GONE, CLOSE_SANDBOX_DISABLED, CLOSE_SANDBOX_RESET } from '../../runtime/rooms/live-close-codes.ts';
import { AFTER_SEQ_DIGITS } from '../../runtime/rooms/live-subscription.ts';
import { LIVE_PROTOCOL } from '../../runtime/rooms/live-upgrade.ts';
import type { Environment } from './api-types.ts';
import { credentialAsSent, credentialProblem, queryCredentialProblem } from './credential-check.ts';
import { SluiceArgumentError } from './api-errors.ts';
import { parseBaseUrl, urlUnder } from './endpoint-url.ts';
import { PlainHttpCheck } from './plain-http-hint.ts';
import { ReconnectLoop } from './reconnect-loop.ts';
import { realSleep, RETRIED_STATUSES, type Sleep } from './retry.ts';
import { runSocket, type SocketEnd } from './socket-run.ts';
import { describeSocketEnd } from './socket-end-text.ts';
import { checkCount } from './count-option.ts';
import { checkTimerDuration } from './timer-duration.ts';
import { describeHandshakeRefusal } from './refusal-body.ts';
import { kindOf, pathId } from './request-arguments.ts';

export type { RunUpdate };

export interface WatchOptions {
  /** Where Sluice listens, e.g. http://127.0.0.1:8787 or, behind a proxy, https://host/sluice/. */
  readonly url: string;
  readonly apiKey: string;
  readonly org: string;
  readonly environment?: Environment;
  /** Only this run's updates. */
  readonly runId?: string;
  /**
   * Start after this seq (a position saved earlier, 0 included: updates after it that Sluice no
   * longer retains end in onReload('replay_gone')); default: live from now.
   */
  readonly afterSeq?: number;
  readonly onUpdate: (update: RunUpdate) => void;
  /**
   * Updates were lost for good (`replay_gone`) or the runs shown were deleted (`sandbox_reset`):
   * reload state over the REST API. Called once the new connection is live, so nothing that
   * happens during the reload is missed.
   */
  readonly onReload?: (reason: 'replay_gone' | 'sandbox_reset') => void | Promise<void>;
  /**
   * How long without a frame counts as a dead connection (default 15 s: three missed heartbeats);
   * also, up to 15 s, the longest a connection may take to open.
   */
  readonly silenceMs?: number;
  /** Hears what `onUpdate`, `onReload` or `onDisconnect` threw (default: a process warning). */
  readonly onError?: (error: unknown) => void;
  /**
   * Hears each connection that ended (or could not open) before the subscription reconnects: a
   * sentence saying why, for a log or a status line, and how it ended: `unreachable` when nothing
   * answered at the url (or within the time a connection may take to open). Not called for an end
   * that stops the subscription (`done` rejects then) or for `close()`.
   */
  readonly onDisconnect?: (why: string, how: SocketEnd['kind']) => void;
  readonly sleep?: Sleep;
}

/**
 * The subscription ended for a reason retrying cannot fix: a close code (4401, 4402, 4404, 1002), an
 * upgrade refused with an HTTP status, or 0 when no connection could be attempted (an API key a
 * WebSocket cannot carry, such as one with a line break in it; a url that is not http(s)).
 */
export class LiveClosedError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = 'LiveClosedError';
    this.code = code;
  }
}

const RELOAD: ReadonlyMap<number, 'sandbox_reset' | 'replay_gone'> = new Map([
  [CLOSE_SANDBOX_RESET, 'sandbox_reset'],
  [CLOSE_REPLAY_GONE, 'replay_gone'],
]);
const TERMINAL_CLOSE = new Set([CLOSE_PROTOCOL_ERROR, CLOSE_KEY_REVOKED, CLOSE_ORG_DELETED, CLOSE_SANDBOX_DISABLED]);
/** The server sends a heartbeat every 5 s: this long without a frame means the connection is dead. */
const SILENCE_MS = 15_000;

export class LiveSubscription {
  /**
   * Resolves when `close()` is called; rejects with LiveClosedError when the server ends it for
   * good. No `onUpdate` is called after `close()`, so `position` read then is final.
   */
  readonly done: Promise<void>;
  readonly #o: WatchOptions;
  readonly #loop: ReconnectLoop;
  #position: number | undefined;
  /**
   * A reload the server asked for (4409/4410), told to the application once a connection is live
   * again. Until then the socket connects live (no after_seq), while `position` keeps the last
   * one: a program that stops meanwhile resumes from it, and is told to reload again.
   */
  #reload: 'sandbox_reset' | 'replay_gone' | undefined;
  #closed = false;
  /**
   * Set by a frame that is not a live message (not protobuf Sluice could have sent): what ends the
   * subscription once its socket is cut. Each such frame had been passed over while it kept the
   * connection looking alive, so a server that is not Sluice was watched in silence for good.
   */
  #notLive: LiveClosedError | undefined;
  /** Aborted by close(): a plain-HTTP check under way ends with it. */
  readonly #closing = new AbortController();
  readonly #plainHttp = new PlainHttpCheck(this.#closing.signal);

  constructor(options: WatchOptions) {
    // As the REST client does: "." and ".." are path segments a URL resolves away, never an org.
    pathId('The organization id', options.org);
    // An empty run id (an unset variable) would watch every run of the org.
    if (options.runId !== undefined && typeof options.runId !== 'string') throw new SluiceArgumentError(`The run id is not text (got ${kindOf(options.runId)}).`);
    if (options.runId === '') throw new SluiceArgumentError('The run id is empty: leave runId out to watch every run.');
    if (options.silenceMs !== undefined) checkTimerDuration('silenceMs', options.silenceMs);
    if (options.afterSeq !== undefined) checkCount('afterSeq', options.afterSeq, 0, 10 ** AFTER_SEQ_DIGITS - 1);
    // As the REST client sends it: without the white space at its ends (a key file's last newline).
    this.#o = { ...options, apiKey: credentialAsSent('The API key', 'apiKey', options.apiKey) };
    this.#position = options.afterSeq;
    this.#loop = new ReconnectLoop({
      // Any frame, a heartbeat too, shows the connection working.
      open: (working) => {
        // A key that cannot be a subprotocol entry (an admin token with "/" or "=") rides in the
        // URL instead, which the server reads too (and access logs may keep).
        const inUrl = credentialProblem('The API key', this.#o.apiKey) !== undefined;
        const problem = inUrl ? queryCredentialProblem('The API key', this.#o.apiKey) : undefined;
        if (problem !== undefined) throw new LiveClosedError(0, problem);
        const url = this.#url();
        if (inUrl) url.searchParams.set('token', this.#o.apiKey);
        return runSocket(url, inUrl ? [LIVE_PROTOCOL] : [LIVE_PROTOCOL, this.#o.apiKey], (data) => this.#onFrame(data, working), this.#o.silenceMs ?? SILENCE_MS);
      },
      classify: (end) => this.#classify(end),
      cannotOpen: (error) => (error instanceof LiveClosedError ? error : new LiveClosedError(0, `the live room cannot be opened: ${error instanceof Error ? error.message : String(error)}`)),
      sleep: options.sleep ?? realSleep,
    });
    this.done = this.#loop.done;
  }

  /** The position to resume from later (`afterSeq`), undefined until the first frame. */
  get position(): number | undefined {
    return this.#position;
  }

  /** Ends the subscription (a wait between attempts too); frames still on their way are dropped. */
  close(): void {
    this.#closed = true;
    this.#closing.abort();
    this.#loop.close();
  }

  /** The error that ends the subscription, or undefined to reconnect (every reconnect waits first: a refusal's Retry-After, else its backoff). */
  async #classify(end: SocketEnd): Promise<LiveClosedError | undefined> {
    if (this.#notLive !== undefined) return this.#notLive;
    if (end.kind === 'refused' && !RETRIED_STATUSES.has(end.status)) return new LiveClosedError(end.status, `the live room refused the connection (${end.status}): ${describeHandshakeRefusal(end.status, end.body)}`);
    // A TLS hello a plain-HTTP server closed or left unanswered: asked once, as the REST client
    // does; Sluice answering in plain HTTP ends the subscription (no retry can get through).
    const plain = await this.#plainHttp.after(end, this.#o.url);
    if (plain !== undefined) return new LiveClosedError(0, `the server speaks plain HTTP (Sluice answered ${plain.href}): use http:// instead of https://`);
    if (end.kind === 'closed') {
      if (TERMINAL_CLOSE.has(end.code)) return new LiveClosedError(end.code, `the live room closed the connection (${end.code}): ${end.reason}`);
      const reload = RELOAD.get(end.code);
      // Reconnect live; the application reloads once that socket has joined (see onReload).
      if (reload !== undefined) this.#reload ??= reload;
    }
    // Like the other callbacks: what it throws is reported, and the subscription goes on.
    try {
      this.#o.onDisconnect?.(describeSocketEnd(end, parseBaseUrl(this.#o.url), 'the live room'), end.kind);
    } catch (error) {
      this.#report(error);
    }
    return undefined;
  }

  #url(): URL {
    const url = urlUnder(parseBaseUrl(this.#o.url), `/organizations/${pathId('The organization id', this.#o.org)}/live`, 'ws');
    if (this.#o.environment !== undefined) url.searchParams.set('environment', this.#o.environment);
    if (this.#o.runId !== undefined) url.searchParams.set('run_id', this.#o.runId);
    if (this.#position !== undefined && this.#reload === undefined) {
      url.searchParams.set('after_seq', String(this.#position));
      // A position of 0 (a quiet org's heartbeat) is a position, not "whatever is retained". Only
      // then: strict changes nothing above 0, and servers before it refuse the parameter.
      if (this.#position === 0) url.searchParams.set('strict', 'true');
    }
    return url;
  }

  /**
   * A frame of a kind this client does not know (a newer server) is skipped; one that does not
   * decode at all ends the subscription (#notLive). `working`: the connection has shown it works.
   */
  #onFrame(data: Buffer, working: () => void): void {
    if (this.#closed || this.#notLive !== undefined) return;
    let message: LiveMessage;
    try {
      message = decodeLiveMessage(new Uint8Array(data));
    } catch (error) {
      if (error instanceof UnknownLiveMessageError) {
        working();
        return;
      }
      this.#notLive = new LiveClosedError(CLOSE_PROTOCOL_ERROR, `the live room sent a frame that is not a Sluice live message (${data.length} bytes): is the url where Sluice listens?`);
      this.#loop.socket?.terminate();
      return;
    }
    working();
    if ('heartbeat' in message) {
      const reload = this.#reload;
      if (reload === undefined) {
        this.#advance(message.heartbeat.last_seq);
        return;
      }
      // Live again: the position starts over from here (it may be lower, in a log that was replaced).
      this.#reload = undefined;
      this.#position = message.heartbeat.last_seq;
      void Promise.resolve().then(() => this.#o.onReload?.(reload)).catch((error: unknown) => this.#report(error));
      return;
    }
    try {
      this.#o.onUpdate(message.run_update);
    } catch (error) {
      // Not counted as seen: unless a later frame moves the position past it, a reconnect sends it again.
      this.#report(error);
      return;
    }
    // Before the reload is told (the first heartbeat of the live socket), the position stays where the gap is.
    if (this.#reload === undefined) this.#advance(message.run_update.seq);
  }

  #report(error: unknown): void {
    if (this.#o.onError !== undefined) this.#o.onError(error);
    else process.emitWarning(`sluice watchRuns: a callback threw: ${error instanceof Error ? error.message : String(error)}`);
  }

  #advance(seq: number): void {
    this.#position = Math.max(this.#position ?? 0, seq);
  }
}

/** Starts watching runs; see LiveSubscription. */
export const watchRuns = (options: WatchOptions): LiveSubscription => new LiveSubscription(options);
