// A server that refuses every WebSocket upgrade with `status` and `body` (what a proxy or an
// impostor at a socket URL may answer), for tests of what clients print of such an answer.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RefusingServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startRefusingUpgradeServer(status: number, body: string): Promise<RefusingServer> {
  const server = createServer((_req, res) => res.writeHead(404).end());
  server.on('upgrade', (_req, socket) =>
    socket.end(`HTTP/1.1 ${status} Refused\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`),
  );
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', () => listening()));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((closed) => server.close(() => closed())),
  };
}
