// Peer (a), the physical limit: a bare uWebSockets.js handler that reads the body and checks its
// Standard Webhooks HMAC (constant time, ±300 s timestamp), then answers 204 — no dedup, no storage.

import { createHmac, timingSafeEqual } from 'node:crypto';
import uWS from 'uWebSockets.js';
import { decodeSigningSecret } from '../load/signed-requests.ts';
import { announceListening, parsePeerArgs, stopOnSignal, TIMESTAMP_TOLERANCE_SEC } from './peer-process.ts';

const args = parsePeerArgs();
const key = decodeSigningSecret(args.secret);

function isSigned(id: string, timestamp: string, signatures: string, body: Buffer): boolean {
  const sentAt = Number(timestamp);
  if (id === '' || !Number.isInteger(sentAt) || Math.abs(Date.now() / 1000 - sentAt) > TIMESTAMP_TOLERANCE_SEC) return false;
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
  return signatures.split(' ').some((entry) => {
    if (!entry.startsWith('v1,')) return false;
    const given = Buffer.from(entry.slice(3), 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

const app = uWS.App().post('/hooks/:org/:source', (res, req) => {
  // Headers live only until the handler returns; the body arrives later.
  const id = req.getHeader('webhook-id');
  const timestamp = req.getHeader('webhook-timestamp');
  const signatures = req.getHeader('webhook-signature');
  let aborted = false;
  const chunks: Buffer[] = [];
  res.onAborted(() => {
    aborted = true;
  });
  res.onData((chunk, isLast) => {
    // uWS reuses the chunk's memory after this callback: copy it.
    chunks.push(Buffer.from(chunk.slice(0)));
    if (!isLast || aborted) return;
    const body = chunks.length === 1 && chunks[0] !== undefined ? chunks[0] : Buffer.concat(chunks);
    const status = isSigned(id, timestamp, signatures, body) ? '204 No Content' : '401 Unauthorized';
    res.cork(() => res.writeStatus(status).end());
  });
});

app.listen('127.0.0.1', args.port, (socket) => {
  if (socket === false) {
    process.stderr.write(`cannot listen on 127.0.0.1:${args.port}\n`);
    process.exit(1);
  }
  announceListening(uWS.us_socket_local_port(socket));
  stopOnSignal(() => uWS.us_listen_socket_close(socket));
});
