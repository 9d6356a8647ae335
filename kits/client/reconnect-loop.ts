// The reconnect loop the live subscription and the device connection share: one socket after
// another until close() or an end that retrying cannot fix, with a backoff wait before each new one
// (or the Retry-After of a refused upgrade).

import type WebSocket from 'ws';
import { backoffMs, MAX_RETRY_AFTER_MS, type Sleep } from './retry.ts';
import type { SocketEnd } from './socket-run.ts';

/** What one use of the loop supplies. */
export interface Reconnecting {
  /**
   * Opens one connection (runSocket); called again for each attempt, so the URL may change
   * between them. The connection calls `working` once it has shown that it works: the backoff
   * starts again after it ends.
   */
  readonly open: (working: () => void) => { readonly socket: WebSocket; readonly ended: Promise<SocketEnd> };
  /**
   * Hears each end that close() did not cause: an error ends the loop (`done` rejects with it,
   * after whatever the caller did here), undefined reconnects after the backoff. It may ask
   * something first (a promise).
   */
  readonly classify: (end: SocketEnd) => Error | undefined | Promise<Error | undefined>;
  /**
   * Hears what `open` threw (a URL or a credential that cannot be sent: no attempt could ever
   * work): the loop ends, and `done` rejects with the error returned.
   */
  readonly cannotOpen: (error: unknown) => Error;
  readonly sleep: Sleep;
}

/** How long close() waits for the server to answer its close before cutting the connection. */
export const CLOSE_ANSWER_MS = 2_000;

export class ReconnectLoop {
  /** Resolves once close() is called; rejects with the error `classify` or `cannotOpen` returned. */
  readonly done: Promise<void>;
  readonly #r: Reconnecting;
  #socket: WebSocket | undefined;
  #closed = false;
  #stop: () => void = () => undefined;
  readonly #stopped = new Promise<void>((resolve) => (this.#stop = resolve));
  /** Ends a wait between attempts, timer and all: a program that closed its last loop can exit at once. */
  readonly #waiting = new AbortController();

  /** Opens the first connection at once (synchronously, within this constructor). */
  constructor(reconnecting: Reconnecting) {
    this.#r = reconnecting;
    this.done = this.#run();
    // Handled here too, so that an application that never awaits `done` does not crash on it.
    this.done.catch(() => undefined);
  }

  /** The socket of the current (or last) attempt. */
  get socket(): WebSocket | undefined {
    return this.#socket;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Ends the loop: closes the socket (1000), cut off if the server has not answered the close
   * within CLOSE_ANSWER_MS (a half-open connection held `done`, and Ctrl-C of a watch, for ws's 30 s),
   * or ends a wait between attempts at once.
   */
  close(): void {
    this.#closed = true;
    this.#stop();
    this.#waiting.abort();
    const socket = this.#socket;
    if (socket === undefined) return;
    socket.close(1000);
    const cut = setTimeout(() => socket.terminate(), CLOSE_ANSWER_MS);
    cut.unref();
    socket.once('close', () => clearTimeout(cut));
  }

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#closed) {
      let working = false;
      let opened: ReturnType<Reconnecting['open']>;
      try {
        opened = this.#r.open(() => (working = true));
      } catch (error) {
        throw this.#r.cannotOpen(error);
      }
      const { socket, ended } = opened;
      this.#socket = socket;
      const end = await ended;
      if (this.#closed) return;
      const error = await this.#r.classify(end);
      if (this.#closed) return;
      if (error !== undefined) throw error;
      if (working) attempt = 0;
      // A refused upgrade's Retry-After (a quota, a device's paused connects) is waited out as told, up to MAX_RETRY_AFTER_MS.
      const hintMs = end.kind === 'refused' && end.retryAfterMs !== undefined ? Math.min(end.retryAfterMs, MAX_RETRY_AFTER_MS) : undefined;
      await Promise.race([this.#r.sleep(backoffMs(attempt++, hintMs), this.#waiting.signal), this.#stopped]);
    }
  }
}
