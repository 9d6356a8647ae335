// Watching runs live, with the resume rules of the live rooms done for you: the client keeps its
// position (the highest RunUpdate.seq or Heartbeat.last_seq seen), reconnects after a drop with
// that position as `after_seq` (so each update arrives once), and when the server says the log
// cannot bring it up to date (4410) or the sandbox was reset (4409) it reconnects live and asks
// the application to reload what it shows. A revoked key (4401) or a refused upgrade ends it.

import WebSocket from 'ws';
import { decodeLiveMessage, type RunUpdate } from '../../runtime/rooms/live-codec.ts';
import type { Environment } from './api-client.ts';
import { backoffMs, realSleep, type Sleep } from './retry.ts';

export type { RunUpdate };

export interface WatchOptions {
  /** Where Sluice listens, e.g. http://127.0.0.1:8787. */
  readonly url: string;
  readonly apiKey: string;
  readonly org: string;
  readonly environment?: Environment;
  /** Only this run's updates. */
  readonly runId?: string;
  /** Start after this seq (a position saved earlier); default: live from now. */
  readonly afterSeq?: number;
  readonly onUpdate: (update: RunUpdate) => void;
  /**
   * Updates were lost for good (`replay_gone`) or the runs shown were deleted (`sandbox_reset`):
   * reload state over the REST API. Called once the new connection is live, so nothing that
   * happens during the reload is missed.
   */
  readonly onReload?: (reason: 'replay_gone' | 'sandbox_reset') => void | Promise<void>;
  readonly sleep?: Sleep;
}

/** The subscription ended for a reason retrying cannot fix: a close code (4401, 4402, 1002) or an upgrade refused with an HTTP status. */
export class LiveClosedError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = 'LiveClosedError';
    this.code = code;
  }
}

const PROTOCOL = 'sluice-live';
const RELOAD: ReadonlyMap<number, 'sandbox_reset' | 'replay_gone'> = new Map([
  [4409, 'sandbox_reset'],
  [4410, 'replay_gone'],
]);
const TERMINAL_CLOSE = new Set([1002, 4401, 4402]);

type Outcome = { readonly kind: 'closed'; readonly code: number; readonly reason: string; readonly heard: boolean } | { readonly kind: 'refused'; readonly status: number; readonly body: string } | { readonly kind: 'unreachable' };

export class LiveSubscription {
  /** Resolves when `close()` is called; rejects with LiveClosedError when the server ends it for good. */
  readonly done: Promise<void>;
  readonly #o: WatchOptions;
  readonly #sleep: Sleep;
  #position: number | undefined;
  #socket: WebSocket | undefined;
  #closed = false;
  #reload: 'sandbox_reset' | 'replay_gone' | undefined;

  constructor(options: WatchOptions) {
    this.#o = options;
    this.#sleep = options.sleep ?? realSleep;
    this.#position = options.afterSeq;
    this.done = this.#run();
    // Handled here too, so that an application that never awaits `done` does not crash on it.
    this.done.catch(() => undefined);
  }

  /** The position to resume from later (`afterSeq`), undefined until the first frame. */
  get position(): number | undefined {
    return this.#position;
  }

  close(): void {
    this.#closed = true;
    this.#socket?.close(1000);
  }

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#closed) {
      const outcome = await this.#connectOnce();
      if (this.#closed) return;
      if (outcome.kind === 'refused' && outcome.status !== 503) throw new LiveClosedError(outcome.status, `the live room refused the connection (${outcome.status}): ${outcome.body}`);
      if (outcome.kind === 'closed') {
        const reload = RELOAD.get(outcome.code);
        if (reload !== undefined) {
          this.#reload = reload;
          this.#position = undefined;
          attempt = 0;
          continue;
        }
        if (TERMINAL_CLOSE.has(outcome.code)) throw new LiveClosedError(outcome.code, `the live room closed the connection (${outcome.code}): ${outcome.reason}`);
        if (outcome.heard) attempt = 0;
      }
      await this.#sleep(backoffMs(attempt++));
    }
  }

  #connectOnce(): Promise<Outcome> {
    const url = new URL(`/organizations/${encodeURIComponent(this.#o.org)}/live`, this.#o.url.replace(/^http/, 'ws'));
    if (this.#o.environment !== undefined) url.searchParams.set('environment', this.#o.environment);
    if (this.#o.runId !== undefined) url.searchParams.set('run_id', this.#o.runId);
    if (this.#position !== undefined) url.searchParams.set('after_seq', String(this.#position));
    const socket = new WebSocket(url, [PROTOCOL, this.#o.apiKey]);
    this.#socket = socket;
    let heard = false;
    return new Promise((resolve) => {
      socket.binaryType = 'nodebuffer';
      socket.on('unexpected-response', (_request, response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        response.on('end', () => resolve({ kind: 'refused', status: response.statusCode ?? 0, body: body.slice(0, 300) }));
      });
      socket.on('error', () => {
        if (socket.readyState !== WebSocket.OPEN) resolve({ kind: 'unreachable' });
      });
      socket.on('message', (data: Buffer) => {
        heard = true;
        const message = decodeLiveMessage(new Uint8Array(data));
        if ('heartbeat' in message) {
          this.#advance(message.heartbeat.last_seq);
          const reload = this.#reload;
          this.#reload = undefined;
          if (reload !== undefined) void Promise.resolve(this.#o.onReload?.(reload)).catch(() => undefined);
          return;
        }
        this.#advance(message.run_update.seq);
        this.#o.onUpdate(message.run_update);
      });
      socket.on('close', (code, reason) => resolve({ kind: 'closed', code, reason: reason.toString(), heard }));
    });
  }

  #advance(seq: number): void {
    this.#position = Math.max(this.#position ?? 0, seq);
  }
}

/** Starts watching runs; see LiveSubscription. */
export const watchRuns = (options: WatchOptions): LiveSubscription => new LiveSubscription(options);
