// Child process: the Node load generator. Replays a pool of pre-signed requests over keep-alive
// raw sockets, closed loop (as fast as answers return) or open loop (fixed schedule, wrk2-style).
//
// Open loop measures each latency from the request's *scheduled* send time, not from when a free
// connection finally sent it, so a stalled server is charged for the queue it caused (no
// coordinated omission). Usage: node --import tsx node-load-worker.ts '<LoadSpec JSON>'

import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { summarizeLatencies } from '../harness/stats.ts';
import type { LoadResult, LoadSpec } from './load-result.ts';
import { createResponseFramer } from './response-framer.ts';
import { readRequestPool } from './signed-requests.ts';

const MAX_RECONNECTS = 1000;

interface Connection {
  socket: Socket;
  inflight: number;
  sentAt: number;
}

function main(spec: LoadSpec): void {
  const requests = readRequestPool(spec.poolFile)
    .slice(0, spec.count)
    .map((r) =>
      Buffer.from(
        `POST ${spec.path} HTTP/1.1\r\nhost: 127.0.0.1:${spec.port}\r\ncontent-type: application/json\r\n` +
          `webhook-id: ${r.id}\r\nwebhook-timestamp: ${r.timestamp}\r\nwebhook-signature: ${r.signature}\r\n` +
          `content-length: ${Buffer.byteLength(r.body)}\r\n\r\n${r.body}`,
      ),
    );
  const total = requests.length;
  const rate = spec.ratePerSec;
  const intervalMs = rate === undefined ? 0 : 1000 / rate;
  const latencies = new Float64Array(total);
  const statuses: Record<string, number> = {};
  const idle: Connection[] = [];
  let completed = 0;
  let failed = 0;
  let reconnects = 0;
  let next = 0;
  let startedAt = 0;
  let lastAnswerAt = 0;
  let timer: NodeJS.Timeout | undefined;
  let finished = false;

  const scheduled = (k: number): number => startedAt + k * intervalMs;

  const pump = (): void => {
    timer = undefined;
    const now = performance.now();
    while (next < total && idle.length > 0) {
      if (rate !== undefined && scheduled(next) > now) {
        timer = setTimeout(pump, scheduled(next) - now);
        return;
      }
      const connection = idle.pop();
      if (connection === undefined) return;
      const request = requests[next];
      if (request === undefined) return;
      connection.inflight = next;
      connection.sentAt = rate === undefined ? now : scheduled(next);
      next += 1;
      connection.socket.write(request);
    }
  };
  const schedulePump = (): void => {
    if (timer === undefined && !finished) pump();
  };

  const finish = (): void => {
    if (finished) return;
    finished = true;
    if (timer !== undefined) clearTimeout(timer);
    for (const c of connections) c.socket.destroy();
    const durationSec = Math.max(1e-9, (lastAnswerAt - startedAt) / 1000);
    const summary = summarizeLatencies(latencies, completed);
    const result: LoadResult = {
      generator: rate === undefined ? 'node-closed-loop' : 'node-open-loop',
      completed,
      statuses,
      socketErrors: failed,
      timedOut: total - completed - failed,
      durationSec,
      throughputPerSec: completed / durationSec,
      ...summary,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
  };

  const open = (): Promise<Connection> =>
    new Promise((resolve, reject) => {
      const connection: Connection = { socket: connect({ host: '127.0.0.1', port: spec.port }), inflight: -1, sentAt: 0 };
      const socket = connection.socket;
      socket.setNoDelay(true);
      socket.on(
        'data',
        createResponseFramer((status) => {
          if (connection.inflight < 0) return;
          const now = performance.now();
          latencies[completed] = now - connection.sentAt;
          completed += 1;
          lastAnswerAt = now;
          const key = String(status);
          statuses[key] = (statuses[key] ?? 0) + 1;
          connection.inflight = -1;
          idle.push(connection);
          if (completed + failed === total) finish();
          else schedulePump();
        }),
      );
      socket.once('connect', () => resolve(connection));
      socket.on('error', () => undefined);
      socket.once('close', () => {
        if (finished) return;
        if (startedAt === 0) {
          reject(new Error(`cannot connect to 127.0.0.1:${spec.port}`));
          return;
        }
        // A request in flight on a closed connection is lost: count it, replace the connection.
        if (connection.inflight >= 0) failed += 1;
        const slot = connections.indexOf(connection);
        const idleSlot = idle.indexOf(connection);
        if (idleSlot >= 0) idle.splice(idleSlot, 1);
        if (completed + failed === total) return finish();
        reconnects += 1;
        if (reconnects > MAX_RECONNECTS) return finish();
        void open().then((fresh) => {
          connections[slot] = fresh;
          idle.push(fresh);
          schedulePump();
        }, finish);
      });
    });

  const connections: Connection[] = [];
  setTimeout(finish, spec.timeoutMs).unref();
  void Promise.all(Array.from({ length: spec.connections }, open)).then(
    (opened) => {
      connections.push(...opened);
      idle.push(...opened);
      startedAt = performance.now();
      lastAnswerAt = startedAt;
      if (total === 0) finish();
      else pump();
    },
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}

main(JSON.parse(process.argv[2] ?? '{}') as LoadSpec);
