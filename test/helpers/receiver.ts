// A local HTTP receiver for webhook steps: records every request and answers from a script
// (status, headers, body per request; the last entry repeats).

import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export interface Reply {
  readonly status: number;
  /** Holds the answer until this promise settles (to keep a step in flight). */
  readonly after?: Promise<unknown>;
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

export interface Receiver {
  readonly url: string;
  readonly received: Received[];
  /** Replace the scripted answers; each request consumes one, the last one repeats. */
  script(replies: Reply[]): void;
  close(): Promise<void>;
}

export async function startReceiver(replies: Reply[] = [{ status: 200, body: '{"ok":true}' }]): Promise<Receiver> {
  let queue = [...replies];
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const reply = (queue.length > 1 ? queue.shift() : queue[0]) ?? { status: 200 };
      void Promise.resolve(reply.after).then(() => {
        res.writeHead(reply.status, { 'content-type': 'application/json', ...(reply.headers ?? {}) });
        res.end(reply.body ?? '');
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    script: (next) => {
      queue = [...next];
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Polls `predicate` every few ms until it holds, failing after `timeoutMs`. */
export async function eventually<T>(what: string, probe: () => T | Promise<T>, predicate: (value: T) => boolean, timeoutMs = 8000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (predicate(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last value: ${JSON.stringify(value)?.slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
