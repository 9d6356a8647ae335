// A TCP listener that takes connections and never answers on them: a server that leaves a client's
// TLS hello, WebSocket handshake or HTTP request hanging. It reads what comes (and counts the
// connections that sent something); `close` ends its connections and stops listening.

import { createServer, type Socket } from 'node:net';

export interface SilentListener {
  readonly port: number;
  /** Connections taken so far. */
  connections(): number;
  /** Connections that sent something (undici may open a spare one that sends nothing). */
  requests(): number;
  close(): Promise<void>;
}

export async function silentListener(): Promise<SilentListener> {
  const sockets: Socket[] = [];
  let requests = 0;
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.once('data', () => requests++);
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    connections: () => sockets.length,
    requests: () => requests,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
