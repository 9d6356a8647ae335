// How `sluice device` paces the messages it sends on one device socket: never more unanswered than
// Sluice stores at once per socket, and a message nacked as retryable is sent again after the wait
// Sluice asked for (the client kit's DeviceConnection does the same; this one sends lines as given).

import { backoffMs, type Sleep } from '../kits/client/retry.ts';
import { frameIdOf } from './triggers/device-frame.ts';

/** An answer frame as far as pacing reads it (device-frame.ts has the wire format). */
export interface DeviceAnswer {
  readonly type: string;
  readonly id?: string | null;
  readonly retryable?: boolean;
  readonly retry_after_ms?: number;
}

/** What an answer meant for the message it names. */
export type AnswerOutcome =
  /** The message's last answer: an ack, or a nack that sending again cannot help. */
  | { readonly kind: 'final'; readonly acked: boolean }
  /** A retryable nack: the message is sent again once `waitMs` is over. */
  | { readonly kind: 'retry'; readonly waitMs: number }
  /** Names no message waiting for an answer (or is not an answer): nothing changes. */
  | { readonly kind: 'unmatched' };

export interface DevicePacerOptions {
  /** Messages unanswered at once at most: Sluice's per-socket cap (MAX_MESSAGES_IN_FLIGHT). */
  readonly cap: number;
  /** Puts one message on the socket. */
  readonly send: (text: string) => void;
  readonly sleep: Sleep;
  /** Called after each sending pass (a wait ended, an answer freed room): the queue may have shrunk. */
  readonly onProgress: () => void;
}

interface Message {
  readonly text: string;
  /** The id Sluice names in its answer: read as Sluice reads it, null when it cannot (a bad frame). */
  readonly id: string | null;
  /** Its place in the order given: messages sent again keep it. */
  readonly order: number;
  /** Retryable nacks so far (the backoff grows with them when Sluice gives no wait). */
  nacks: number;
}

export class DevicePacer {
  readonly #o: DevicePacerOptions;
  /** Not sent yet, in the order given; a message to send again goes back in its place, ahead of those never sent. */
  readonly #unsent: Message[] = [];
  #given = 0;
  /** Sent and unanswered, by the id their answer names (several lines may share one), oldest first. */
  readonly #sent = new Map<string | null, Message[]>();
  #unanswered = 0;
  /**
   * How many may be unanswered now: the cap, halved at each retryable nack and grown back by one
   * per ack. Without it, every wait would end with the whole cap sent into the same refusal (an
   * org's quota refills one message at a time), a storm of nacks; with it, sending settles at the
   * rate Sluice accepts.
   */
  #window: number;
  /** Waits Sluice asked for that are not over: nothing is sent until they are. */
  #waits = 0;

  constructor(options: DevicePacerOptions) {
    this.#o = options;
    this.#window = options.cap;
  }

  /** Messages given and not sent yet (a message waiting to be sent again included). */
  get queued(): number {
    return this.#unsent.length;
  }

  /** Whether every message given has its last answer. */
  get settled(): boolean {
    return this.#unsent.length === 0 && this.#unanswered === 0;
  }

  /**
   * The messages without a final answer, by id (null: one whose id Sluice could not read), in the
   * order given: `sent`, sent and unanswered (each may have been stored), and `unsent`, never sent
   * or waiting to be sent again after a retryable nack (not stored by this connection).
   */
  unfinished(): { readonly sent: ReadonlyArray<string | null>; readonly unsent: ReadonlyArray<string | null> } {
    const byOrder = (a: Message, b: Message): number => a.order - b.order;
    return {
      sent: [...this.#sent.values()].flat().sort(byOrder).map((message) => message.id),
      unsent: [...this.#unsent].sort(byOrder).map((message) => message.id),
    };
  }

  /** Queues one message (its text as given) and sends what there is room for. */
  add(text: string): void {
    this.#unsent.push({ text, id: frameIdOf(Buffer.from(text, 'utf8'), false), order: this.#given++, nacks: 0 });
    this.#pump();
  }

  /**
   * Reads one answer. A retryable nack puts its message back in line, in its place ahead of the
   * messages never sent, and holds all sending for
   * the wait Sluice gave (`retry_after_ms`, else a backoff of 250 ms doubling to 30 s): a quota or a
   * busy server refuses the next message as it refused this one.
   */
  answer(answer: DeviceAnswer): AnswerOutcome {
    if (answer.type !== 'ack' && answer.type !== 'nack') return { kind: 'unmatched' };
    // A nack of a frame whose id Sluice could not read names none (null): any such message will do,
    // each of them only ever gets such nacks.
    const key = answer.id ?? null;
    const named = this.#sent.get(key);
    const message = named?.shift();
    if (message === undefined) return { kind: 'unmatched' };
    if (named?.length === 0) this.#sent.delete(key);
    this.#unanswered--;
    if (answer.type === 'ack') {
      this.#window = Math.min(this.#o.cap, this.#window + 1);
      this.#pump();
      return { kind: 'final', acked: true };
    }
    if (answer.retryable !== true) {
      this.#pump();
      return { kind: 'final', acked: false };
    }
    this.#window = Math.max(1, Math.floor(this.#window / 2));
    // Several nacked at once go back in the order they were given (one by one, each first, they
    // would go out newest first), all ahead of the messages never sent.
    const place = this.#unsent.findIndex((waiting) => waiting.order > message.order);
    this.#unsent.splice(place < 0 ? this.#unsent.length : place, 0, message);
    const waitMs = backoffMs(message.nacks++, answer.retry_after_ms);
    this.#waits++;
    const over = (): void => {
      this.#waits--;
      this.#pump();
    };
    void this.#o.sleep(waitMs).then(over, over);
    return { kind: 'retry', waitMs };
  }

  /** Sends queued messages, oldest first, while no wait is running and the window has room. */
  #pump(): void {
    while (this.#waits === 0 && this.#unanswered < this.#window) {
      const message = this.#unsent.shift();
      if (message === undefined) break;
      const named = this.#sent.get(message.id);
      if (named === undefined) this.#sent.set(message.id, [message]);
      else named.push(message);
      this.#unanswered++;
      this.#o.send(message.text);
    }
    this.#o.onProgress();
  }
}
