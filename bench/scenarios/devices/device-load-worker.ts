// Child process, the devices load: opens one WebSocket per device, then keeps a fixed number of JSON
// messages in flight on each (closed loop); each message is timed from its send to its ack.
//
// Usage: node --import tsx device-load-worker.ts '<DeviceLoadSpec JSON>'; prints one DeviceLoadResult line.

import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { DEVICE_PROTOCOL } from '../../../runtime/triggers/device-upgrade.ts';
import { summarizeLatencies } from '../../harness/stats.ts';
import { buildEventPayload } from '../../load/signed-requests.ts';
import { startCpuWindow } from '../runs/bench-cpu.ts';
import { DEVICE_MESSAGE_TYPE, type DeviceLoadResult, type DeviceLoadSpec, type DeviceSocketSpec } from './devices-protocol.ts';

const spec = JSON.parse(process.argv[2] ?? '{}') as DeviceLoadSpec;
// One payload for every message: the id, not the payload, makes a message new.
const payloadJson = buildEventPayload('device-bench', spec.payloadBytes);

interface Answer {
  readonly type?: string;
  readonly id?: string | null;
  readonly duplicate?: boolean;
  readonly error?: { readonly code?: string; readonly message?: string };
}

/** One run over every socket: message i has the id `<idPrefix>-<prefix>-<i>`, sent once. */
interface Phase {
  readonly idStart: string;
  readonly count: number;
  readonly sentAt: Float64Array;
  readonly answered: Uint8Array;
  /** Per message: ms from send to a fresh ack, NaN for any other answer. */
  readonly latencies: Float64Array;
  next: number;
  done: number;
  accepted: number;
  duplicates: number;
  nacks: number;
  resolve: () => void;
  reject: (error: Error) => void;
}

let phase: Phase | undefined;
let firstError: string | undefined;
/** A socket that failed or closed after its `ready`, between phases too: the next phase fails at once. */
let lost: Error | undefined;

function loseSocket(error: Error): void {
  lost ??= error;
  phase?.reject(error);
}

function sendNext(socket: WebSocket, p: Phase): void {
  const i = p.next++;
  if (i >= p.count) return;
  p.sentAt[i] = performance.now();
  socket.send(`{"id":"${p.idStart}${i}","type":"${DEVICE_MESSAGE_TYPE}","payload":${payloadJson}}`);
}

function onAnswer(socket: WebSocket, data: Buffer): void {
  const now = performance.now();
  const p = phase;
  const answer = JSON.parse(data.toString('utf8')) as Answer;
  if (p === undefined) {
    firstError ??= `an answer outside a run: ${data.toString('utf8').slice(0, 200)}`;
    return;
  }
  const id = typeof answer.id === 'string' && answer.id.startsWith(p.idStart) ? Number(answer.id.slice(p.idStart.length)) : Number.NaN;
  if (!Number.isInteger(id) || id < 0 || id >= p.count || p.answered[id] === 1) {
    // A nack without a readable id, or an id answered twice: the run cannot finish cleanly.
    p.reject(new Error(`unexpected answer: ${data.toString('utf8').slice(0, 300)}`));
    return;
  }
  p.answered[id] = 1;
  p.done += 1;
  if (answer.type === 'ack' && answer.duplicate === false) {
    p.accepted += 1;
    p.latencies[id] = now - (p.sentAt[id] ?? now);
  } else {
    p.latencies[id] = Number.NaN;
    if (answer.type === 'ack') p.duplicates += 1;
    else p.nacks += 1;
    firstError ??= data.toString('utf8').slice(0, 300);
  }
  if (p.done === p.count) p.resolve();
  else sendNext(socket, p);
}

/** Opens a device socket; resolves once the server sent `ready` (for Sluice: the connection is durable). */
function connect(target: DeviceSocketSpec): Promise<WebSocket> {
  const socket = new WebSocket(`ws://127.0.0.1:${spec.port}${target.path}`, [DEVICE_PROTOCOL, target.token], { perMessageDeflate: false });
  return new Promise((resolve, reject) => {
    let ready = false;
    socket.on('unexpected-response', (_request, response) => reject(new Error(`${target.path}: upgrade refused with ${response.statusCode ?? '?'}`)));
    socket.on('error', (error) => (ready ? loseSocket(error) : reject(error)));
    socket.on('close', (code, reason) => {
      const error = new Error(`${target.path}: socket closed (${code} ${reason.toString()})`);
      if (ready) loseSocket(error);
      else reject(error);
    });
    socket.on('message', (data: Buffer) => {
      if (ready) return onAnswer(socket, data);
      const first = JSON.parse(data.toString('utf8')) as Answer;
      if (first.type !== 'ready') return reject(new Error(`${target.path}: first frame is not ready: ${data.toString('utf8').slice(0, 200)}`));
      ready = true;
      resolve(socket);
    });
  });
}

async function run(sockets: readonly WebSocket[], prefix: string, count: number): Promise<Phase> {
  if (lost !== undefined) throw lost;
  const p = await new Promise<Phase>((resolve, reject) => {
    const started: Phase = {
      idStart: `${spec.idPrefix}-${prefix}-`,
      count,
      sentAt: new Float64Array(count),
      answered: new Uint8Array(count),
      latencies: new Float64Array(count),
      next: 0,
      done: 0,
      accepted: 0,
      duplicates: 0,
      nacks: 0,
      resolve: () => resolve(started),
      reject,
    };
    phase = started;
    if (count === 0) resolve(started);
    for (const socket of sockets) for (let k = 0; k < spec.inFlightPerSocket; k += 1) sendNext(socket, started);
  });
  phase = undefined;
  return p;
}

const bound = setTimeout(() => {
  process.stderr.write(`device load: not done within ${spec.timeoutMs} ms (${phase === undefined ? 'connecting' : `${phase.done}/${phase.count} answered`})\n`);
  process.exit(1);
}, spec.timeoutMs);

/** Connects, warms up, measures; rejects (the row fails) on a refused upgrade, a closed socket or an answer no message expects. */
async function measure(): Promise<DeviceLoadResult> {
  const sockets = await Promise.all(spec.sockets.map(connect));
  const warmup = await run(sockets, 'warmup', spec.warmup);
  const cpu = startCpuWindow();
  const started = performance.now();
  const measured = await run(sockets, 'measured', spec.count);
  const durationSec = (performance.now() - started) / 1000;
  const loadCpuCores = cpu();
  await Promise.all(
    sockets.map(
      (socket) =>
        new Promise<void>((resolve) => {
          socket.removeAllListeners('close');
          socket.once('close', () => resolve());
          socket.close(1000);
        }),
    ),
  );
  const ok = measured.latencies.filter((v) => !Number.isNaN(v));
  const summary = summarizeLatencies(ok, ok.length);
  return {
    completed: measured.done,
    accepted: measured.accepted,
    duplicates: measured.duplicates,
    nacks: measured.nacks,
    ...(firstError === undefined ? {} : { firstError }),
    durationSec,
    throughputPerSec: measured.accepted / durationSec,
    ...(summary === undefined ? {} : summary),
    warmupAcked: warmup.accepted,
    loadCpuCores,
  };
}

try {
  const result = await measure();
  clearTimeout(bound);
  process.stdout.write(`${JSON.stringify(result)}\n`);
} catch (error) {
  // One line, so the failed row's note names the cause rather than a stack.
  process.stderr.write(`device load: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
