// Peer for the fan-out scenario: a `ws` server that rebroadcasts every binary frame its driver sends to
// all subscribers, one `send` per subscriber as in the ws README's broadcast example; no batching, no storage.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { WebSocketServer, type WebSocket } from 'ws';
import { announceListening, stopOnSignal } from './peer-process.ts';

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' } } });

const subscribers = new Set<WebSocket>();
let broadcasts = 0;

// Plain HTTP on the same port: `GET /stats` lets the bench read this process's CPU without /proc.
const server = createServer((req, res) => {
  if (req.url !== '/stats') {
    res.writeHead(404).end();
    return;
  }
  const cpu = process.cpuUsage();
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ cpuSeconds: (cpu.user + cpu.system) / 1e6, subscribers: subscribers.size, broadcasts }));
});

const wss = new WebSocketServer({ server, perMessageDeflate: false, maxPayload: 4096, clientTracking: false });
wss.on('connection', (socket, req) => {
  socket.on('error', () => socket.terminate());
  if (req.url === '/driver') {
    socket.on('message', (data, isBinary) => {
      broadcasts += 1;
      for (const subscriber of subscribers) subscriber.send(data, { binary: isBinary });
    });
    return;
  }
  subscribers.add(socket);
  socket.once('close', () => subscribers.delete(socket));
});

// A deep accept queue, like uWS: 10,000 subscribers connect in a burst.
server.listen({ host: '127.0.0.1', port: Number(values.port), backlog: 4096 }, () => {
  announceListening((server.address() as AddressInfo).port);
  stopOnSignal(() => {
    for (const socket of subscribers) socket.terminate();
    wss.close();
    server.close();
  });
});
