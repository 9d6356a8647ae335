// The ingest load itself: 1 KB JSON events with unique ids, signed the Standard Webhooks way
// (DESIGN §6.2), written to a pool file that wrk's Lua script and the Node load generator both read.

import { createHmac, randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';

/**
 * Pool file format, one request per line, tab-separated, no escaping needed because
 * ids, timestamps and signatures are tab-free and JSON.stringify never emits a raw tab or newline:
 * `<webhook-id>\t<webhook-timestamp>\t<webhook-signature>\t<body>\n`
 */
export interface PooledRequest {
  readonly id: string;
  readonly timestamp: string;
  readonly signature: string;
  readonly body: string;
}

export const EVENT_TYPE = 'invoice.paid';

/** A fresh `whsec_` secret over 32 random bytes (the scheme needs at least 24). */
export function createSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** The HMAC key of a `whsec_` secret: base64 of what follows the prefix. */
export function decodeSigningSecret(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

/** `v1,<base64 HMAC-SHA256 of "${id}.${timestamp}.${body}">`. */
export function signStandardWebhook(key: Buffer, id: string, timestamp: string, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** A Stripe-like event of exactly `bytes` bytes (ASCII), whose `type` is {@link EVENT_TYPE}. */
export function buildEventPayload(id: string, bytes: number): string {
  const event = {
    type: EVENT_TYPE,
    id: `evt_${id}`,
    created: 1_700_000_000,
    data: { object: { customer: 'cus_bench', amount: 4200, currency: 'usd', description: '' } },
  };
  const pad = bytes - JSON.stringify(event).length;
  if (pad < 0) throw new RangeError(`payload of ${bytes} bytes is smaller than the event skeleton`);
  event.data.object.description = 'x'.repeat(pad);
  return JSON.stringify(event);
}

export interface PoolSpec {
  readonly file: string;
  readonly count: number;
  /** Makes ids unique across pools of one run: ids are `msg_<prefix>_<n>`. */
  readonly idPrefix: string;
  readonly secret: string;
  readonly payloadBytes: number;
  /** Seconds since the epoch; every request carries it (fresh: within the ±300 s tolerance). */
  readonly nowSec: number;
}

const LINES_PER_WRITE = 4096;

/** Writes `count` signed requests in the pool format. Streams in chunks: a big pool exceeds V8's string limit. */
export function writeRequestPool(spec: PoolSpec): void {
  const key = decodeSigningSecret(spec.secret);
  const timestamp = String(spec.nowSec);
  const fd = openSync(spec.file, 'w');
  try {
    let chunk: string[] = [];
    for (let n = 0; n < spec.count; n += 1) {
      const id = `msg_${spec.idPrefix}_${n}`;
      const body = buildEventPayload(id, spec.payloadBytes);
      chunk.push(`${id}\t${timestamp}\t${signStandardWebhook(key, id, timestamp, body)}\t${body}\n`);
      if (chunk.length === LINES_PER_WRITE) {
        writeSync(fd, chunk.join(''));
        chunk = [];
      }
    }
    if (chunk.length > 0) writeSync(fd, chunk.join(''));
  } finally {
    closeSync(fd);
  }
}

/** Reads a pool line by line from bytes, so a pool larger than V8's string limit still loads. */
export function readRequestPool(file: string): PooledRequest[] {
  const bytes = readFileSync(file);
  const requests: PooledRequest[] = [];
  for (let start = 0; start < bytes.length; ) {
    let end = bytes.indexOf(0x0a, start);
    if (end === -1) end = bytes.length;
    const line = bytes.toString('utf8', start, end);
    start = end + 1;
    if (line === '') continue;
    const [id, timestamp, signature, body] = line.split('\t');
    if (id === undefined || timestamp === undefined || signature === undefined || body === undefined) {
      throw new Error(`malformed pool line in ${file}: ${line.slice(0, 80)}`);
    }
    requests.push({ id, timestamp, signature, body });
  }
  return requests;
}
