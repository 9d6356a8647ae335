// A device's side of the device socket, made so that nothing it sends is lost: every message keeps
// its id until Sluice acks it; after a drop the connection comes back on its own and sends again
// whatever was not acked (Sluice recognises a message it already stored by its id); a retryable
// nack is sent again after the wait Sluice asked for. A non-retryable nack rejects that message.

import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { backoffMs, realSleep, type Sleep } from './retry.ts';

export interface DeviceOptions {
  /** Where Sluice listens, e.g. http://127.0.0.1:8787. */
  readonly url: string;
  readonly org: string;
  readonly device: string;
  readonly token: string;
  /** Messages held until acked (default 10,000); past it `send` rejects at once. */
  readonly maxPending?: number;
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

/** A message Sluice refused for good (`code` from its nack), or the connection ended for good (a close code or HTTP status). */
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

/** Sluice stores at most this many messages of a socket at once; the client sends no more than that unacked. */
const IN_FLIGHT = 64;
/** Close codes after which connecting again cannot help: rotated token, sandbox gone, device deleted, replaced by a newer connection. */
const TERMINAL_CLOSE = new Set([4401, 4402, 4404, 4409]);

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
  #socket: WebSocket | undefined;
  #ready = false;
  #closed = false;
  #ended: DeviceError | undefined;

  constructor(options: DeviceOptions) {
    this.#o = options;
    this.#sleep = options.sleep ?? realSleep;
    this.done = this.#run();
    this.done.catch(() => undefined);
  }

  /** Whether the socket is open and Sluice has stored the connection. */
  get connected(): boolean {
    return this.#ready;
  }

  /** Messages not acked yet. */
  get pending(): number {
    return this.#pending.size;
  }

  /** Resolves once the message is stored durably (acked), however many reconnects that takes. */
  send(message: DeviceMessage): Promise<Acked> {
    if (this.#ended !== undefined) return Promise.reject(this.#ended);
    if (this.#closed) return Promise.reject(new DeviceError('closed', 'The device connection was closed.'));
    if (this.#pending.size >= (this.#o.maxPending ?? 10_000)) return Promise.reject(new DeviceError('too_many_pending', 'Too many messages wait for their ack; wait for some first.'));
    const id = message.id ?? `msg_${randomUUID()}`;
    if (this.#pending.has(id)) return Promise.reject(new DeviceError('id_in_use', `A message with id "${id}" is still waiting for its ack.`, 'id'));
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { id, frame: JSON.stringify({ ...message, id }), resolve, reject, sent: false, waiting: false, attempts: 0 });
      this.#pump();
    });
  }

  /** Closes the socket; messages still unacked are rejected (their ids are safe to send again later). */
  close(): void {
    this.#closed = true;
    this.#socket?.close(1000);
    this.#failAll(new DeviceError('closed', 'The device connection was closed before Sluice acked this message.'));
  }

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#closed) {
      const ending = await this.#connectOnce();
      this.#ready = false;
      if (this.#closed) return;
      if (ending.terminal !== undefined) {
        this.#ended = ending.terminal;
        this.#failAll(ending.terminal);
        throw ending.terminal;
      }
      if (ending.wasReady) attempt = 0;
      await this.#sleep(backoffMs(attempt++));
    }
  }

  #connectOnce(): Promise<{ terminal?: DeviceError; wasReady: boolean }> {
    const url = new URL(`/devices/${encodeURIComponent(this.#o.org)}/${encodeURIComponent(this.#o.device)}`, this.#o.url.replace(/^http/, 'ws'));
    const socket = new WebSocket(url, ['sluice-device', this.#o.token]);
    this.#socket = socket;
    let wasReady = false;
    for (const pending of this.#pending.values()) pending.sent = false;
    return new Promise((resolve) => {
      socket.on('unexpected-response', (_request, response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        response.on('end', () => {
          const status = response.statusCode ?? 0;
          // 503: Sluice is starting or stopping; anything else is about the device or its token.
          resolve(status === 503 ? { wasReady } : { terminal: new DeviceError(`http_${status}`, `Sluice refused the device socket (${status}): ${body.slice(0, 300)}`), wasReady });
        });
      });
      socket.on('error', () => {
        if (socket.readyState !== WebSocket.OPEN) resolve({ wasReady });
      });
      socket.on('message', (data: Buffer) => {
        const frame = JSON.parse(data.toString('utf8')) as { type: string; id?: string | null; event_id?: string; duplicate?: boolean; error?: { code: string; message: string; field?: string }; retryable?: boolean; retry_after_ms?: number };
        if (frame.type === 'ready') {
          wasReady = true;
          this.#ready = true;
        } else {
          this.#answer(frame);
        }
        this.#pump();
      });
      socket.on('close', (code, reason) => {
        const terminal = TERMINAL_CLOSE.has(code) ? new DeviceError(`closed_${code}`, `Sluice closed the device socket (${code}): ${reason.toString()}`) : undefined;
        resolve(terminal === undefined ? { wasReady } : { terminal, wasReady });
      });
    });
  }

  #answer(frame: { type: string; id?: string | null; event_id?: string; duplicate?: boolean; error?: { code: string; message: string; field?: string }; retryable?: boolean; retry_after_ms?: number }): void {
    const pending = frame.id === null || frame.id === undefined ? undefined : this.#pending.get(frame.id);
    if (pending === undefined) return;
    if (frame.type === 'ack') {
      this.#pending.delete(pending.id);
      pending.resolve({ event_id: frame.event_id ?? '', duplicate: frame.duplicate === true });
      return;
    }
    if (frame.retryable === true) {
      pending.sent = false;
      pending.waiting = true;
      void this.#sleep(backoffMs(pending.attempts++, frame.retry_after_ms)).then(() => {
        pending.waiting = false;
        this.#pump();
      });
      return;
    }
    this.#pending.delete(pending.id);
    pending.reject(new DeviceError(frame.error?.code ?? 'refused', frame.error?.message ?? 'Sluice refused the message.', frame.error?.field));
  }

  /** Sends unsent messages, oldest first, while fewer than IN_FLIGHT are unanswered on this socket. */
  #pump(): void {
    const socket = this.#socket;
    if (!this.#ready || socket === undefined || socket.readyState !== WebSocket.OPEN) return;
    let inFlight = 0;
    for (const pending of this.#pending.values()) if (pending.sent) inFlight++;
    for (const pending of this.#pending.values()) {
      if (inFlight >= IN_FLIGHT) return;
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
