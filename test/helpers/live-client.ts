// A real WebSocket client (the `ws` package) for live rooms that decodes protobuf frames.
// Collects every LiveMessage and the close code, and waits on conditions with a bounded deadline.

import WebSocket from 'ws';
import { decodeLiveMessage, encodeClientMessage, type LiveMessage, type RunUpdate, type Subscribe } from '../../runtime/rooms/live-codec.ts';

export interface LiveClient {
  readonly socket: WebSocket;
  readonly messages: LiveMessage[];
  readonly updates: () => RunUpdate[];
  readonly closed: Promise<{ code: number; reason: string }>;
  subscribe(subscribe: Partial<Subscribe>): void;
  waitFor(predicate: () => boolean, what: string, timeoutMs?: number): Promise<void>;
  close(): void;
}

export function connectLive(baseUrl: string, orgId: string, options: { token?: string; protocols?: string[]; query?: string } = {}): Promise<LiveClient> {
  const query = options.query ?? (options.token === undefined ? '' : `?token=${encodeURIComponent(options.token)}`);
  const url = `${baseUrl.replace('http', 'ws')}/organizations/${orgId}/live${query}`;
  const socket = new WebSocket(url, options.protocols ?? []);
  const messages: LiveMessage[] = [];
  socket.binaryType = 'nodebuffer';
  socket.on('message', (data: Buffer) => messages.push(decodeLiveMessage(new Uint8Array(data))));
  const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  const client: LiveClient = {
    socket,
    messages,
    updates: () => messages.flatMap((m) => ('run_update' in m ? [m.run_update] : [])),
    closed,
    subscribe: (subscribe) =>
      socket.send(encodeClientMessage({ subscribe: { after_seq: 0, environment: '', run_id: '', ...subscribe } })),
    waitFor: async (predicate, what, timeoutMs = 5000) => {
      const deadline = Date.now() + timeoutMs;
      while (!predicate()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    close: () => socket.close(),
  };
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(client));
    // With this listener, ws leaves the refused request open: ended here, or it outlives the test.
    socket.once('unexpected-response', (req, res) => {
      req.destroy();
      reject(new Error(`upgrade refused: ${res.statusCode}`));
    });
    socket.once('error', reject);
  });
}
