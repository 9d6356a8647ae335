// The local HTTP endpoint that webhook steps of the run scenarios (recovery, fairness, e2e) POST to:
// counts every delivery per idempotency key, and either answers 200 at once or holds the answer.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** `answer`: 200 at once. `hold`: keep the request open (the step stays in flight) until `answerHeld`. */
export type ReceiverMode = 'answer' | 'hold';

export interface ReceiverCounts {
  readonly deliveries: number;
  readonly distinctKeys: number;
  /** Keys delivered more than once. */
  readonly redeliveredKeys: number;
  /**
   * Deliveries of a key whose earlier delivery this receiver had already answered 200 (response fully
   * written). Zero is the promise when nothing crashed between that answer and the sender's record of it.
   */
  readonly deliveriesAfterAck: number;
  readonly answered: number;
  readonly held: number;
}

export interface EffectReceiver {
  readonly url: string;
  mode: ReceiverMode;
  counts(): ReceiverCounts;
  /** Answers 200 to every request held so far (the connections still open). */
  answerHeld(): number;
  /** The keys of the requests held unanswered now (connections still open). */
  heldKeys(): Set<string>;
  /**
   * Deliveries beyond one per key, or two for a key in `heldAtKill` (sent once more after a crash
   * is the promise for a request left unanswered), summed over the keys: a key sent twice and
   * another not sent again do not cancel out, as totals would.
   */
  excessDeliveries(heldAtKill: ReadonlySet<string>): number;
  /** Called for every delivery as it arrives, with the key and the arrival time (performance.now()). */
  onDelivery?: (key: string, atMs: number) => void;
  close(): Promise<void>;
}

interface KeyState {
  deliveries: number;
  acked: boolean;
}

const OK_BODY = '{"ok":true}';

export async function startEffectReceiver(mode: ReceiverMode): Promise<EffectReceiver> {
  const keys = new Map<string, KeyState>();
  let held: { res: ServerResponse; key: string }[] = [];
  let deliveries = 0;
  let deliveriesAfterAck = 0;
  let answered = 0;

  const answer = (res: ServerResponse, key: string): void => {
    if (res.destroyed) return;
    res.once('finish', () => {
      answered += 1;
      const state = keys.get(key);
      if (state !== undefined) state.acked = true;
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(OK_BODY.length) });
    res.end(OK_BODY);
  };

  let url = '';
  const receiver: EffectReceiver = {
    get url() {
      return url;
    },
    mode,
    counts: () => {
      let redeliveredKeys = 0;
      for (const state of keys.values()) if (state.deliveries > 1) redeliveredKeys += 1;
      return { deliveries, distinctKeys: keys.size, redeliveredKeys, deliveriesAfterAck, answered, held: held.filter((h) => !h.res.destroyed).length };
    },
    heldKeys: () => new Set(held.filter((h) => !h.res.destroyed).map((h) => h.key)),
    excessDeliveries: (heldAtKill) => {
      let excess = 0;
      for (const [key, state] of keys) excess += Math.max(0, state.deliveries - (heldAtKill.has(key) ? 2 : 1));
      return excess;
    },
    answerHeld: () => {
      const open = held.filter((h) => !h.res.destroyed);
      held = [];
      for (const h of open) answer(h.res, h.key);
      return open.length;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const h of held) h.res.destroy();
        held = [];
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  const server: Server = createServer({ keepAliveTimeout: 120_000 }, (req: IncomingMessage, res: ServerResponse) => {
    const key = String(req.headers['idempotency-key'] ?? req.headers['webhook-id'] ?? '');
    // The body is not needed: drain it so the connection can be reused.
    req.resume();
    req.once('end', () => {
      deliveries += 1;
      const state = keys.get(key);
      if (state === undefined) keys.set(key, { deliveries: 1, acked: false });
      else {
        state.deliveries += 1;
        if (state.acked) deliveriesAfterAck += 1;
      }
      receiver.onDelivery?.(key, performance.now());
      if (receiver.mode === 'hold') {
        held.push({ res, key });
      } else answer(res, key);
    });
  });
  server.headersTimeout = 120_000;
  server.requestTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  url = `http://127.0.0.1:${port}/effects`;
  return receiver;
}
