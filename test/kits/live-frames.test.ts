// What the live subscription makes of a server's frames and of its own close (found by a CLI probe):
// a frame that is not a live message at all (a server that is not Sluice) ends the subscription
// with 1002 instead of keeping a silent connection looking alive; a well-formed message of a kind
// this client does not know (a newer server) is still skipped; and close() against a server that
// never answers the close ends within seconds, not ws's 30 s.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { after, test } from 'node:test';
import { WebSocketServer } from 'ws';
import { LiveClosedError, watchRuns, type Sleep } from '../../kits/client/index.ts';
import { encodeLiveMessage } from '../../runtime/rooms/live-codec.ts';
import { LIVE_PROTOCOL } from '../../runtime/rooms/live-upgrade.ts';

const noWait: Sleep = async () => undefined;
const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers) await close();
});

/** A WebSocket server taking the live subprotocol that sends `frames` to each connection. */
async function framesServer(frames: readonly Buffer[]): Promise<string> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: (offered) => (offered.has(LIVE_PROTOCOL) ? LIVE_PROTOCOL : false) });
  wss.on('connection', (socket) => {
    for (const frame of frames) socket.send(frame, { binary: true });
  });
  await new Promise((resolve) => wss.once('listening', resolve));
  closers.push(async () => {
    for (const client of wss.clients) client.terminate();
    await new Promise((resolve) => wss.close(resolve));
  });
  return `http://127.0.0.1:${(wss.address() as AddressInfo).port}`;
}

const heartbeat = (lastSeq: number): Buffer => Buffer.from(encodeLiveMessage({ heartbeat: { last_seq: lastSeq } } as never));

test('a frame that is not a live message ends the subscription with 1002, saying so', { timeout: 15_000 }, async () => {
  const url = await framesServer([heartbeat(3), Buffer.from('<html>502 Bad Gateway</html>')]);
  const live = watchRuns({ url, apiKey: 'k', org: 'o', sleep: noWait, onUpdate: () => undefined });
  await assert.rejects(live.done, (error: unknown) => error instanceof LiveClosedError && error.code === 1002 && /sent a frame that is not a Sluice live message \(28 bytes\): is the url where Sluice listens\?/.test(error.message));
  assert.equal(live.position, 3, 'what came before it counted');
});

test('a well-formed message of a kind this client does not know is skipped, as a newer server may send', async () => {
  // Field 15, varint 1: a LiveMessage member this client has no name for.
  const url = await framesServer([Buffer.from([0x78, 0x01]), heartbeat(7)]);
  const live = watchRuns({ url, apiKey: 'k', org: 'o', sleep: noWait, onUpdate: () => undefined });
  const deadline = Date.now() + 5000;
  while (live.position !== 7 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(live.position, 7);
  live.close();
  await live.done;
});

test('close() against a server that never answers the close cuts the connection: done settles within seconds', { timeout: 15_000 }, async () => {
  // A hand-made handshake, then a heartbeat, then nothing: no close frame ever comes back.
  const sockets = new Set<Socket>();
  let ended = false;
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => (ended = true));
    socket.once('data', (head: Buffer) => {
      const key = /sec-websocket-key: *(\S+)/i.exec(head.toString('latin1'))?.[1] ?? '';
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      const frame = heartbeat(1);
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: ${LIVE_PROTOCOL}\r\n\r\n`);
      socket.write(Buffer.concat([Buffer.from([0x82, frame.length]), frame]));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const live = watchRuns({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'k', org: 'o', sleep: noWait, onUpdate: () => undefined });
  const deadline = Date.now() + 5000;
  while (live.position !== 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(live.position, 1, 'joined');
  live.close();
  await live.done;
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(ended, true, 'the connection was cut');
});
