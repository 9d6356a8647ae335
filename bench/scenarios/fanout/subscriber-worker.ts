// Child process: one share of the fan-out subscribers (lean `ws` clients, no deflate). Every frame is
// counted and scanned for seq/at_ms; the bench drives rounds over this worker's HTTP control port.
//
// Usage: node --import tsx subscriber-worker.ts '<SubscriberWorkerSpec JSON>'; announces its control port.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { decodeLiveMessage } from '../../../runtime/rooms/live-codec.ts';
import { announceListening, stopOnSignal } from '../../peers/peer-process.ts';
import type { ConnectResult, SubscriberWorkerSpec, WorkerProgress, WorkerRoundResult } from './fanout-protocol.ts';
import { scanLiveFrame, type ScannedFrame } from './frame-scan.ts';
import { createLagHistogram, recordLag, toSparse, type LagHistogram } from './lag-histogram.ts';

const spec = JSON.parse(process.argv[2] ?? '{}') as SubscriberWorkerSpec;

/** One round: the sockets of one (system, subscriber count) measurement and what they received. */
interface Round {
  readonly sockets: WebSocket[];
  updates: Uint32Array;
  lastSeq: Float64Array;
  /**
   * Sum of the seqs each socket received. With the count, and no seq received twice (`seen`), it
   * tells "each of 1..N once": N distinct whole numbers from 1 sum to N(N+1)/2 only when they are
   * 1..N. (Count and sum alone took 1,1,4,4,5 for 1..5.)
   */
  seqSum: Float64Array;
  /** Per socket, a bit per seq received (grown as seqs come); a seq seen again marks `repeated`. */
  seen: Uint8Array[];
  repeated: Uint8Array;
  windowStartMs: number;
  totals: { updates: number; measured: number; receivedInWindow: number; heartbeats: number; bytes: number; outOfOrder: number; badFrames: number; checked: number; mismatches: number };
  firstMeasuredAtMs: number | null;
  lastMeasuredAtMs: number | null;
  /** Wall-clock ms of the first and last update received (whenever stamped) once the window opened. */
  firstWindowReceiptAtMs: number | null;
  lastWindowReceiptAtMs: number | null;
  readonly closedByCode: Record<string, number>;
  lag: LagHistogram;
  cpuAtStart: NodeJS.CpuUsage;
  wallAtStart: number;
}

let round: Round | undefined;
const scanned: ScannedFrame = { kind: 'run_update', seq: 0, atMs: 0 };

function newRound(count: number): Round {
  return {
    sockets: [],
    updates: new Uint32Array(count),
    lastSeq: new Float64Array(count),
    seqSum: new Float64Array(count),
    seen: [],
    repeated: new Uint8Array(count),
    windowStartMs: Number.POSITIVE_INFINITY,
    totals: { updates: 0, measured: 0, receivedInWindow: 0, heartbeats: 0, bytes: 0, outOfOrder: 0, badFrames: 0, checked: 0, mismatches: 0 },
    firstMeasuredAtMs: null,
    lastMeasuredAtMs: null,
    firstWindowReceiptAtMs: null,
    lastWindowReceiptAtMs: null,
    closedByCode: {},
    lag: createLagHistogram(),
    cpuAtStart: process.cpuUsage(),
    wallAtStart: performance.now(),
  };
}

function onFrame(r: Round, index: number, data: Buffer): void {
  const atMs = performance.timeOrigin + performance.now();
  const t = r.totals;
  t.bytes += data.length;
  try {
    scanLiveFrame(data, scanned);
  } catch {
    t.badFrames += 1;
    return;
  }
  if (scanned.kind === 'heartbeat') {
    t.heartbeats += 1;
    return;
  }
  t.updates += 1;
  if (t.updates % spec.checkEvery === 0) verify(r, data);
  r.updates[index] = (r.updates[index] as number) + 1;
  r.seqSum[index] = (r.seqSum[index] as number) + scanned.seq;
  if (markSeen(r, index, scanned.seq)) r.repeated[index] = 1;
  if (scanned.seq < (r.lastSeq[index] as number)) t.outOfOrder += 1;
  else r.lastSeq[index] = scanned.seq;
  if (atMs >= r.windowStartMs) {
    t.receivedInWindow += 1;
    r.firstWindowReceiptAtMs ??= atMs;
    r.lastWindowReceiptAtMs = atMs;
  }
  if (scanned.atMs < r.windowStartMs) return;
  t.measured += 1;
  r.firstMeasuredAtMs ??= atMs;
  r.lastMeasuredAtMs = atMs;
  recordLag(r.lag, atMs - scanned.atMs);
}

/** Sets the bit of `seq` for the socket; true when it was set already (a repeat), or is no seq a round can have. */
function markSeen(r: Round, index: number, seq: number): boolean {
  if (!(Number.isInteger(seq) && seq >= 1 && seq < 2 ** 28)) return true;
  const byte = seq >>> 3;
  let bits = r.seen[index];
  if (bits === undefined || byte >= bits.length) {
    const grown = new Uint8Array(Math.max(64, 2 ** Math.ceil(Math.log2(byte + 1))));
    if (bits !== undefined) grown.set(bits);
    r.seen[index] = bits = grown;
  }
  const mask = 1 << (seq & 7);
  const was = ((bits[byte] as number) & mask) !== 0;
  bits[byte] = (bits[byte] as number) | mask;
  return was;
}

/** The scan is only trusted because a sample of frames is decoded in full and compared. */
function verify(r: Round, data: Buffer): void {
  r.totals.checked += 1;
  try {
    const message = decodeLiveMessage(new Uint8Array(data));
    if (!('run_update' in message) || message.run_update.seq !== scanned.seq || message.run_update.at_ms !== scanned.atMs) r.totals.mismatches += 1;
  } catch {
    r.totals.mismatches += 1;
  }
}

function connectOne(r: Round, url: string, index: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { perMessageDeflate: false, maxPayload: 64 * 1024 });
    socket.binaryType = 'nodebuffer';
    r.sockets[index] = socket;
    socket.on('message', (data: Buffer) => onFrame(r, index, data));
    socket.once('open', () => resolve());
    socket.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode ?? 'no status'}`)));
    socket.on('error', (error) => reject(error));
    socket.once('close', (code) => {
      if (round === r) r.closedByCode[String(code)] = (r.closedByCode[String(code)] ?? 0) + 1;
    });
  });
}

async function connectRound(url: string, count: number): Promise<ConnectResult> {
  closeRound();
  const r = newRound(count);
  round = r;
  let next = 0;
  let failed = 0;
  let firstError: string | undefined;
  const connector = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      try {
        await connectOne(r, url, i);
      } catch (error) {
        failed += 1;
        firstError ??= error instanceof Error ? error.message : String(error);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(count, spec.connectConcurrency) }, connector));
  return { connected: count - failed, failed, ...(firstError === undefined ? {} : { firstError }) };
}

function progress(): WorkerProgress {
  const r = round;
  if (r === undefined) return { open: 0, minUpdates: 0, maxUpdates: 0 };
  let min = Number.POSITIVE_INFINITY;
  let max = 0;
  let open = 0;
  r.sockets.forEach((socket, i) => {
    if (socket.readyState !== WebSocket.OPEN) return;
    open += 1;
    const n = r.updates[i] as number;
    if (n < min) min = n;
    if (n > max) max = n;
  });
  return { open, minUpdates: open === 0 ? 0 : min, maxUpdates: max };
}

/** Sockets that received exactly seqs 1..expected: the right count and sum, no seq twice (no repeat hiding a miss). */
function completeSockets(r: Round, expected: number): number {
  const sum = (expected * (expected + 1)) / 2;
  let complete = 0;
  r.updates.forEach((n, i) => {
    if (n === expected && r.seqSum[i] === sum && r.repeated[i] === 0) complete += 1;
  });
  return complete;
}

async function finishRound(expected: number, timeoutMs: number): Promise<WorkerRoundResult> {
  const r = round;
  if (r === undefined) throw new Error('no round to finish');
  const deadline = performance.now() + timeoutMs;
  const open = (): number => r.sockets.filter((s) => s.readyState === WebSocket.OPEN).length;
  // Sockets the server closed cannot catch up: wait for the open ones only.
  while (performance.now() < deadline && progress().minUpdates < expected && open() > 0) await new Promise((resolve) => setTimeout(resolve, 10));
  const cpu = process.cpuUsage(r.cpuAtStart);
  const wallMs = performance.now() - r.wallAtStart;
  const t = r.totals;
  const result: WorkerRoundResult = {
    sockets: r.sockets.length,
    closedByCode: { ...r.closedByCode },
    updates: t.updates,
    measuredUpdates: t.measured,
    firstMeasuredAtMs: r.firstMeasuredAtMs,
    lastMeasuredAtMs: r.lastMeasuredAtMs,
    receivedInWindow: t.receivedInWindow,
    firstWindowReceiptAtMs: r.firstWindowReceiptAtMs,
    lastWindowReceiptAtMs: r.lastWindowReceiptAtMs,
    heartbeats: t.heartbeats,
    bytes: t.bytes,
    complete: completeSockets(r, expected),
    outOfOrder: t.outOfOrder,
    badFrames: t.badFrames,
    checkedFrames: t.checked,
    checkMismatches: t.mismatches,
    lag: toSparse(r.lag),
    cpuCores: wallMs <= 0 ? 0 : (cpu.user + cpu.system) / 1000 / wallMs,
  };
  closeRound();
  return result;
}

function closeRound(): void {
  const r = round;
  round = undefined;
  for (const socket of r?.sockets ?? []) socket.terminate();
}

function startWindow(windowStartMs: number): void {
  const r = round;
  if (r === undefined) throw new Error('no round to start');
  r.windowStartMs = windowStartMs;
  r.cpuAtStart = process.cpuUsage();
  r.wallAtStart = performance.now();
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://control');
  const number = (name: string): number => Number(url.searchParams.get(name) ?? 'NaN');
  let body: unknown;
  if (req.method === 'POST' && url.pathname === '/connect') body = await connectRound(url.searchParams.get('url') ?? '', number('count'));
  else if (req.method === 'GET' && url.pathname === '/progress') body = progress();
  else if (req.method === 'POST' && url.pathname === '/start') {
    startWindow(number('windowStartMs'));
    body = {};
  }
  else if (req.method === 'POST' && url.pathname === '/finish') body = await finishRound(number('expected'), number('timeoutMs'));
  else {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

const control = createServer((req, res) => {
  req.resume();
  handle(req, res).catch((error: unknown) => {
    res.writeHead(500, { 'content-type': 'text/plain' }).end(error instanceof Error ? error.message : String(error));
  });
});
control.requestTimeout = 0;
control.listen(0, '127.0.0.1', () => announceListening((control.address() as AddressInfo).port));
stopOnSignal(() => {
  closeRound();
  control.close();
});
