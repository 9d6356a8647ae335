// Peer for the devices scenario: a bare `ws` server that stores each device message in LMDB and acks
// it once flushed, as a user would write it: JSON.parse, dedup by (device, id) with ifNoExists, the
// same records and durability as Sluice's device ingest (runtime/ledger/open-ledger.ts), no auth past the path.
//
// Usage: node --import tsx ws-lmdb-devices.ts --port 0 --data-dir <dir>; GET /stats gives its CPU and counts.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { open } from 'lmdb';
import { WebSocketServer, type WebSocket } from 'ws';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { PLAIN_MSGPACK } from '../../runtime/ledger/open-ledger.ts';
import { DEVICE_PROTOCOL } from '../../runtime/triggers/device-upgrade.ts';
import { MAX_DEVICE_MESSAGE_BYTES, MAX_MESSAGES_IN_FLIGHT } from '../../runtime/triggers/device-frame.ts';
import { announceListening, stopOnSignal } from './peer-process.ts';

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' }, 'data-dir': { type: 'string' } } });
if (values['data-dir'] === undefined) throw new Error('--data-dir is required');

// As runtime/ledger/open-ledger.ts: a write resolves at commit and carries its own batch's flush.
const root = open({ path: values['data-dir'], maxDbs: 8, overlappingSync: true, separateFlushed: true, compression: false, ...PLAIN_MSGPACK });
const db = (name: string) => root.openDB({ name, compression: false, ...PLAIN_MSGPACK });
const inbox = db('inbox');
const inboxByTime = db('inbox-by-time');
const events = db('events');
const eventsByTime = db('events-by-time');

let stored = 0;
let duplicates = 0;
let nacks = 0;

interface Message {
  readonly id: string;
  readonly type: string;
  readonly payload: Record<string, unknown>;
}

/** The message a text frame carries, or the nack's error code. */
function parseMessage(text: string): Message | { readonly error: string; readonly id: string | null } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { error: 'malformed_json', id: null };
  }
  const { id, type, payload } = (value ?? {}) as { id?: unknown; type?: unknown; payload?: unknown };
  if (typeof id !== 'string' || id.length === 0 || id.length > 256) return { error: 'invalid_message', id: null };
  if (typeof type !== 'string' || (payload !== undefined && (typeof payload !== 'object' || payload === null || Array.isArray(payload)))) return { error: 'invalid_message', id };
  return { id, type, payload: (payload ?? {}) as Record<string, unknown> };
}

/** Stores the message unless (org, device, id) was stored before; resolves once flushed, with the event id and whether it was new. */
async function store(org: string, device: string, message: Message): Promise<{ eventId: string; duplicate: boolean }> {
  const source = `@device:${device}`;
  const nowMs = Date.now();
  const eventId = `evt_${randomUUID()}`;
  const claim = [org, source, message.id];
  const write = inbox.ifNoExists(claim, () => {
    inbox.put(claim, { event_id: eventId, claimed_at_ms: nowMs });
    inboxByTime.put([nowMs, org, source, message.id], null);
    events.put([org, eventId], {
      id: eventId,
      org_id: org,
      type: message.type,
      payload_json: JSON.stringify(message.payload),
      environment: 'production',
      source,
      provider_event_id: message.id,
      received_at: new Date(nowMs).toISOString(),
      received_at_ms: nowMs,
      correlation_id: eventId,
      causation_id: null,
      depth: 0,
      replay_skip_side_effects: false,
    });
    eventsByTime.put([org, 'production', nowMs, eventId], null);
  });
  if (await durably(root, write)) return { eventId, duplicate: false };
  // The original may be committed but not yet on disk: answer once it is.
  await root.flushed;
  return { eventId: String((inbox.get(claim) as { event_id?: unknown } | undefined)?.event_id), duplicate: true };
}

function nack(socket: WebSocket, id: string | null, code: string, retryable: boolean): void {
  nacks += 1;
  socket.send(JSON.stringify({ type: 'nack', id, error: { code, message: code }, retryable }));
}

const server = createServer((req, res) => {
  if (req.url !== '/stats') {
    res.writeHead(404).end();
    return;
  }
  const cpu = process.cpuUsage();
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ cpuSeconds: (cpu.user + cpu.system) / 1e6, stored, duplicates, nacks }));
});

const sockets = new Set<WebSocket>();
const wss = new WebSocketServer({
  server,
  perMessageDeflate: false,
  maxPayload: 2 * MAX_DEVICE_MESSAGE_BYTES,
  handleProtocols: (offered) => (offered.has(DEVICE_PROTOCOL) ? DEVICE_PROTOCOL : false),
});
wss.on('connection', (socket, req) => {
  const [, prefix, org, device] = (req.url ?? '').split('?')[0]?.split('/') ?? [];
  if (prefix !== 'devices' || org === undefined || device === undefined) {
    socket.close(4404, 'not a device path');
    return;
  }
  sockets.add(socket);
  let inFlight = 0;
  socket.on('error', () => socket.terminate());
  socket.once('close', () => sockets.delete(socket));
  socket.on('message', (data: Buffer, isBinary) => {
    if (isBinary) return nack(socket, null, 'unsupported_frame', false);
    if (data.length > MAX_DEVICE_MESSAGE_BYTES) return nack(socket, null, 'frame_too_large', false);
    if (inFlight >= MAX_MESSAGES_IN_FLIGHT) return nack(socket, null, 'too_many_in_flight', true);
    const message = parseMessage(data.toString('utf8'));
    if ('error' in message) return nack(socket, message.id, message.error, false);
    inFlight += 1;
    store(org, device, message).then(
      ({ eventId, duplicate }) => {
        if (duplicate) duplicates += 1;
        else stored += 1;
        socket.send(JSON.stringify({ type: 'ack', id: message.id, event_id: eventId, duplicate }));
      },
      () => nack(socket, message.id, 'internal_error', true),
    ).finally(() => {
      inFlight -= 1;
    });
  });
  socket.send(JSON.stringify({ type: 'ready', device }));
});

server.listen({ host: '127.0.0.1', port: Number(values.port), backlog: 4096 }, () => {
  announceListening((server.address() as AddressInfo).port);
  stopOnSignal(async () => {
    for (const socket of sockets) socket.terminate();
    wss.close();
    server.close();
    await root.close();
  });
});
