// Receivers that send what no request asked for: bytes on a kept-alive connection between requests
// (Node's idle timeout restarts with each, so it was never closed, and every byte was read on the
// event loop), and interim (1xx) answers without end (read until the step's deadline). Against
// real local TCP receivers that speak just enough HTTP.

import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, test } from 'node:test';
import { MAX_INTERIM_ANSWERS } from '../../runtime/runs/outbound-post.ts';
import { eventually } from '../helpers/receiver.ts';
import { attempt, connectionPool } from '../helpers/webhook-attempts.ts';

const servers: Server[] = [];
const sockets = new Set<Socket>();
after(async () => {
  for (const socket of sockets) socket.destroy();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A TCP receiver: `onRequest` is called with the socket once a request's head and body (`{"n":1}`) came. */
async function receiver(onRequest: (socket: Socket) => void): Promise<{ url: string; connections: () => number }> {
  let connections = 0;
  const server = createServer((socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    let seen = '';
    socket.on('data', (chunk: Buffer) => {
      seen += chunk.toString('latin1');
      // One request at a time: its head ends with a blank line, and its body is `{"n":1}`.
      while (seen.includes('\r\n\r\n{"n":1}')) {
        seen = seen.slice(seen.indexOf('\r\n\r\n{"n":1}') + '\r\n\r\n{"n":1}'.length);
        onRequest(socket);
      }
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, connections: () => connections };
}

test('a kept-alive connection on which the receiver writes between requests is closed at once; the next request goes on a new one and reads a real answer', async () => {
  const pool = connectionPool();
  const chatty = await receiver((socket) => {
    socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    // Then a byte every 20 ms, unasked, for as long as the connection lasts.
    const drip = setInterval(() => socket.writable && socket.write('x'), 20);
    socket.once('close', () => clearInterval(drip));
  });
  const first = await attempt(chatty.url, {}, pool);
  assert.equal(first.ok, true, JSON.stringify(first));
  await eventually('the idle connection to be closed', () => pool.stats().open, (open) => open === 0, 2000);
  const second = await attempt(chatty.url, {}, pool);
  assert.equal(second.ok, true, JSON.stringify(second));
  assert.equal(chatty.connections(), 2, 'a new connection for the second request');
});

test(`interim (1xx) answers past ${MAX_INTERIM_ANSWERS} give the request up as a network error, well before its deadline; a few are passed over`, async () => {
  const pool = connectionPool();
  const endless = await receiver((socket) => {
    const flood = (): void => {
      while (socket.writable && socket.write('HTTP/1.1 102 Processing\r\n\r\n'));
      if (socket.writable) socket.once('drain', flood);
    };
    flood();
  });
  const flooded = await attempt(endless.url, { timeoutMs: 60_000 }, pool);
  assert.equal(flooded.ok, false);
  assert.equal(!flooded.ok && flooded.error.code, 'webhook_network_error');
  assert.match(!flooded.ok ? flooded.error.message : '', new RegExp(`more than ${MAX_INTERIM_ANSWERS} interim \\(1xx\\) answers`));
  const patient = await receiver((socket) => socket.write(`${'HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n'.repeat(MAX_INTERIM_ANSWERS)}HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok`));
  const answered = await attempt(patient.url, {}, pool);
  assert.equal(answered.ok, true, JSON.stringify(answered));
});
