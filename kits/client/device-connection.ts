// A device's side of the device socket, made so that nothing it sends is lost: every message keeps
// its id until Sluice acks it; after a drop the connection comes back on its own and sends again
// whatever was not acked (Sluice recognises a message it already stored by its id); a retryable
// nack is sent again after the wait Sluice asked for. A non-retryable nack rejects that message.

import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { credentialProblem, givenCredential } from './credential-check.ts';
import { parseBaseUrl, urlUnder } from './endpoint-url.ts';
import { ReconnectLoop } from './reconnect-loop.ts';
import { backoffMs, realSleep, RETRIED_STATUSES, type Sleep } from './retry.ts';
import { isDeliveryId } from '../../runtime/ingest/verification.ts';
import {
  CLOSE_DEVICE_DELETED,
  CLOSE_REPLACED,
  CLOSE_SANDBOX_DISABLED,
  CLOSE_TOKEN_ROTATED,
  MAX_DEVICE_MESSAGE_BYTES,
  MAX_MESSAGES_IN_FLIGHT,
} from '../../runtime/triggers/device-frame.ts';
import { DEVICE_PROTOCOL } from '../../runtime/triggers/device-upgrade.ts';
import { KEEPALIVE_MS, runSocket, type SocketEnd } from './socket-run.ts';
import { describeSocketEnd } from './socket-end-text.ts';
import { PlainHttpCheck } from './plain-http-hint.ts';
import { checkTimerDuration } from './timer-duration.ts';
import { checkCount } from './count-option.ts';
import { pathId } from './request-arguments.ts';
import { describeHandshakeRefusal } from './refusal-body.ts';

export interface DeviceOptions {
  /** Where Sluice listens, e.g. http://127.0.0.1:8787 or, behind a proxy, https://host/sluice/. */
  readonly url: string;
  readonly org: string;
  readonly device: string;
  readonly token: string;
  /** Messages held until acked (default 10,000, at most 1,000,000); past it `send` rejects at once. */
  readonly maxPending?: number;
  /**
   * How long without a frame, a ping or the answer to the connection's own ping counts as a dead
   * connection (default 150 s). It pings Sluice every 20 s, or every third of silenceMs if that is
   * shorter (at most every 100 ms). A connection not open within 15 s, or silenceMs if shorter, is given up.
   */
  readonly silenceMs?: number;
  /**
   * Hears each connection that ended (or could not open) before it reconnects: a sentence saying
   * why, for a log or a status line (an unreachable url, a typo'd port, an https:// url at plain-HTTP
   * Sluice). Not called for an end that stops the connection (`done` rejects then) or for `close()`.
   * What it throws is a process warning.
   */
  readonly onDisconnect?: (why: string) => void;
  readonly sleep?: Sleep;
}

export interface DeviceMessage {
  /** The dedup key; default: a fresh one. Give your own to make a retry across restarts of your program safe. */
  readonly id?: string;
  readonly type: string;
  readonly payload?: Record<string, unknown>;
}

export interface Acked {
  readonly event_id: string;
  /** Stored by an earlier attempt (or an earlier message with this id). */
  readonly duplicate: boolean;
}

/**
 * A message Sluice refused for good (`code` from its nack), or the connection ended for good: a
 * close code (`closed_4401`), an HTTP status (`http_404`), or a connection that cannot be attempted
 * (`invalid_token`: a token a WebSocket cannot carry, such as one with a trailing newline;
 * `invalid_options`: a url that is not http(s), say), or an https:// url at Sluice, which answered
 * in plain HTTP (`plain_http`).
 */
export class DeviceError extends Error {
  readonly code: string;
  readonly field: string | undefined;
  constructor(code: string, message: string, field?: string) {
    super(message);
    this.name = 'DeviceError';
    this.code = code;
    this.field = field;
  }
}

/** Close codes after which connecting again cannot help: rotated token, sandbox gone, device deleted, replaced by a newer connection. */
const TERMINAL_CLOSE = new Set([CLOSE_TOKEN_ROTATED, CLOSE_SANDBOX_DISABLED, CLOSE_DEVICE_DELETED, CLOSE_REPLACED]);
/** This long without a frame, a ping or a pong means the connection is dead (it pings every KEEPALIVE_MS, Sluice a socket quiet for 120 s). */
export const DEVICE_SILENCE_MS = 150_000;
/**
 * A connection ready this long counts as working (its backoff starts again after it ends), as one
 * that got an ack does: a quiet device came back ever later after each restart of Sluice, while one
 * cut off sooner after `ready`, every time, still backs off.
 */
export const DEVICE_MIN_UPTIME_MS = 5_000;
/** The most often a device socket pings, however small silenceMs (a silenceMs under 300 ms then ends quiet connections). */
const MIN_KEEPALIVE_MS = 100;
const MAX_PENDING = 1_000_000;

interface Answer {
  readonly type: string;
  readonly id?: string | null;
  readonly event_id?: string;
  readonly duplicate?: boolean;
  readonly error?: { readonly code: string; readonly message: string; readonly field?: string };
  readonly retryable?: boolean;
  readonly retry_after_ms?: number;
}

interface Pending {
  readonly id: string;
  readonly frame: string;
  readonly resolve: (acked: Acked) => void;
  readonly reject: (error: DeviceError) => void;
  /** Sent on the current socket and not answered yet. */
  sent: boolean;
  /** Waiting out a retryable nack before it is sent again. */
  waiting: boolean;
  attempts: number;
}

export class DeviceConnection {
  /** Resolves when `close()` is called; rejects with DeviceError when Sluice ends the connection for good. */
  readonly done: Promise<void>;
  readonly #o: DeviceOptions;
  readonly #sleep: Sleep;
  /** Unacked messages, in the order they were sent. */
  readonly #pending = new Map<string, Pending>();
  readonly #loop: ReconnectLoop;
  #ready = false;
  #ended: DeviceError | undefined;
  /**
   * How many may be unanswered now: Sluice's per-socket cap, halved at each retryable nack and grown
   * back by one per ack, as `sluice device` paces (runtime/device-pacer.ts). Without it every wait
   * ended with the whole cap sent into the same refusal (an org's quota refills one message at a
   * time): ~38 nacks per accepted message.
   */
  #window = MAX_MESSAGES_IN_FLIGHT;
  /** Waits Sluice asked for that are not over: nothing is sent until they are. */
  #waits = 0;
  /** Ends the waits between retries at close(), so their timers keep no program alive (and a plain-HTTP check). */
  readonly #closing = new AbortController();
  readonly #plainHttp = new PlainHttpCheck(this.#closing.signal);

  constructor(options: DeviceOptions) {
    // Each message nacked for a while waits on it: up to every one in flight at once. Past Node's
    // default of 10 listeners it warns of a leak that is not one (each wait removes its own).
    setMaxListeners(MAX_MESSAGES_IN_FLIGHT + 1, this.#closing.signal);
    // As the REST client does: "." and ".." are path segments a URL resolves away, never a name.
    pathId('The organization id', options.org);
    pathId('The device name', options.device);
    // Checked as given, not trimmed: a token with a line break in it is refused with that named.
    givenCredential('The device token', 'token', options.token);
    if (options.silenceMs !== undefined) checkTimerDuration('silenceMs', options.silenceMs);
    if (options.maxPending !== undefined) checkCount('maxPending', options.maxPending, 1, MAX_PENDING);
    this.#o = options;
    this.#sleep = options.sleep ?? realSleep;
    this.#loop = new ReconnectLoop({
      open: (working) => this.#open(working),
      classify: (end) => this.#classify(end),
      cannotOpen: (error) => this.#end(error instanceof DeviceError ? error : new DeviceError('invalid_options', `The device socket cannot be opened: ${error instanceof Error ? error.message : String(error)}`)),
      sleep: this.#sleep,
    });
    this.done = this.#loop.done;
  }

  /** Whether the socket is open and Sluice has stored the connection. */
  get connected(): boolean {
    return this.#ready;
  }

  /** Messages not acked yet. */
  get pending(): number {
    return this.#pending.size;
  }

  /**
   * Resolves once the message is stored durably (acked), however many reconnects that takes. A
   * message Sluice would refuse whatever happens (too large, a bad id) is rejected before sending.
   */
  send(message: DeviceMessage): Promise<Acked> {
    if (this.#ended !== undefined) return Promise.reject(this.#ended);
    if (this.#loop.closed) return Promise.reject(new DeviceError('closed', 'The device connection was closed.'));
    if (this.#pending.size >= (this.#o.maxPending ?? 10_000)) return Promise.reject(new DeviceError('too_many_pending', 'Too many messages wait for their ack; wait for some first.'));
    const id = message.id ?? `msg_${randomUUID()}`;
    if (!isDeliveryId(id)) return Promise.reject(new DeviceError('invalid_message', 'A message id is 1-256 printable ASCII characters.', 'id'));
    if (this.#pending.has(id)) return Promise.reject(new DeviceError('id_in_use', `A message with id "${id}" is still waiting for its ack.`, 'id'));
    // The id first: a nack Sluice answers before reading the message (back-pressure) reads it from the frame's first bytes.
    const { id: _given, ...fields } = message;
    const frame = JSON.stringify({ id, ...fields });
    if (Buffer.byteLength(frame) > MAX_DEVICE_MESSAGE_BYTES) return Promise.reject(new DeviceError('frame_too_large', `A device message is at most ${MAX_DEVICE_MESSAGE_BYTES} bytes.`));
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { id, frame, resolve, reject, sent: false, waiting: false, attempts: 0 });
      this.#pump();
    });
  }

  /** Closes the socket (a wait between attempts too); messages still unacked are rejected (their ids are safe to send again later). */
  close(): void {
    this.#closing.abort();
    this.#loop.close();
    this.#failAll(new DeviceError('closed', 'The device connection was closed before Sluice acked this message.'));
  }

  /** One attempt: every unacked message is sent again on the new socket. Throws (ending it all) for a token or url that cannot work. */
  #open(working: () => void): ReturnType<typeof runSocket> {
    const problem = credentialProblem('The device token', this.#o.token);
    if (problem !== undefined) throw new DeviceError('invalid_token', problem, 'token');
    const url = urlUnder(parseBaseUrl(this.#o.url), `/devices/${pathId('The organization id', this.#o.org)}/${pathId('The device name', this.#o.device)}`, 'ws');
    for (const pending of this.#pending.values()) pending.sent = false;
    const silenceMs = this.#o.silenceMs ?? DEVICE_SILENCE_MS;
    // Ends the wait for DEVICE_MIN_UPTIME_MS with the connection (and at close(), with its socket).
    const up = new AbortController();
    const keepAliveMs = Math.min(KEEPALIVE_MS, Math.max(MIN_KEEPALIVE_MS, Math.floor(silenceMs / 3)));
    const { socket, ended } = runSocket(url, [DEVICE_PROTOCOL, this.#o.token], (data) => {
      let answer: Answer;
      try {
        answer = JSON.parse(data.toString('utf8')) as Answer;
      } catch {
        return; // not a frame of this protocol: skipped
      }
      if (answer.type === 'ready') {
        this.#ready = true;
        // A sleep may reject when its signal aborts (node:timers/promises' does): that is no failure.
        this.#sleep(DEVICE_MIN_UPTIME_MS, up.signal).then(() => {
          if (!up.signal.aborted) working();
        }, () => undefined);
      }
      // Only a connection that got something stored, or stayed ready DEVICE_MIN_UPTIME_MS, counts
      // as working: one dropped right after `ready` (every time, say) backs off like one never opened.
      else if (this.#answer(answer)) working();
      this.#pump();
    }, silenceMs, undefined, keepAliveMs);
    // Not ready from the moment the socket is over, whether close() ended it or not.
    return {
      socket,
      ended: ended.finally(() => {
        this.#ready = false;
        up.abort();
      }),
    };
  }

  /** The error that ends the connection (every pending send rejects with it first), or undefined to reconnect after a wait (a refusal's Retry-After, else the backoff). */
  async #classify(end: SocketEnd): Promise<DeviceError | undefined> {
    // A TLS hello a plain-HTTP server closed or left unanswered: asked once, as watchRuns does;
    // Sluice answering in plain HTTP ends the connection (no retry can get through).
    const plain = await this.#plainHttp.after(end, this.#o.url);
    if (plain !== undefined) return this.#end(new DeviceError('plain_http', `The server speaks plain HTTP (Sluice answered ${plain.href}): use http:// instead of https://.`));
    const terminal =
      end.kind === 'refused' && !RETRIED_STATUSES.has(end.status)
        ? new DeviceError(`http_${end.status}`, `Sluice refused the device socket (${end.status}): ${describeHandshakeRefusal(end.status, end.body)}`)
        : end.kind === 'closed' && TERMINAL_CLOSE.has(end.code)
          ? new DeviceError(`closed_${end.code}`, `Sluice closed the device socket (${end.code}): ${end.reason}`)
          : undefined;
    if (terminal !== undefined) return this.#end(terminal);
    try {
      this.#o.onDisconnect?.(describeSocketEnd(end, parseBaseUrl(this.#o.url), 'the device socket'));
    } catch (error) {
      process.emitWarning(`sluice connectDevice: onDisconnect threw: ${error instanceof Error ? error.message : String(error)}`);
    }
    return undefined;
  }

  /** Ends the connection for good: pending sends reject with `error`, and so does every later one. */
  #end(error: DeviceError): DeviceError {
    this.#ended = error;
    this.#failAll(error);
    return error;
  }

  /** Settles the message an answer names; true for an ack. */
  #answer(answer: Answer): boolean {
    // A nack without an id answers a frame Sluice could not read the id of: the oldest one sent
    // (frames are checked before sending, so this is a backstop that keeps a send from hanging).
    const pending = answer.id === null || answer.id === undefined ? (answer.type === 'nack' ? [...this.#pending.values()].find((p) => p.sent) : undefined) : this.#pending.get(answer.id);
    if (pending === undefined) return false;
    if (answer.type === 'ack') {
      this.#window = Math.min(MAX_MESSAGES_IN_FLIGHT, this.#window + 1);
      this.#pending.delete(pending.id);
      pending.resolve({ event_id: answer.event_id ?? '', duplicate: answer.duplicate === true });
      return true;
    }
    if (answer.retryable === true) {
      pending.sent = false;
      pending.waiting = true;
      // A quota or a busy server refuses the next message as it refused this one: all sending
      // holds for the wait, and fewer go at once after it.
      this.#window = Math.max(1, Math.floor(this.#window / 2));
      this.#waits++;
      const again = (): void => {
        pending.waiting = false;
        this.#waits--;
        this.#pump();
      };
      void this.#sleep(backoffMs(pending.attempts++, answer.retry_after_ms), this.#closing.signal).then(again, again);
      return false;
    }
    this.#pending.delete(pending.id);
    pending.reject(new DeviceError(answer.error?.code ?? 'refused', answer.error?.message ?? 'Sluice refused the message.', answer.error?.field));
    return false;
  }

  /** Sends unsent messages, oldest first, while no wait runs and fewer than the window (at most Sluice's cap) are unanswered on this socket. */
  #pump(): void {
    const socket = this.#loop.socket;
    if (!this.#ready || this.#waits > 0 || socket === undefined || socket.readyState !== socket.OPEN) return;
    let inFlight = 0;
    for (const pending of this.#pending.values()) if (pending.sent) inFlight++;
    for (const pending of this.#pending.values()) {
      if (inFlight >= this.#window) return;
      if (pending.sent || pending.waiting) continue;
      pending.sent = true;
      inFlight++;
      socket.send(pending.frame);
    }
  }

  #failAll(error: DeviceError): void {
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }
}

/** Opens a device connection; see DeviceConnection. */
export const connectDevice = (options: DeviceOptions): DeviceConnection => new DeviceConnection(options);
