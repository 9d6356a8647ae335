// A live-room subscriber for the run scenarios: one WebSocket per org (the `ws` package), protobuf
// frames decoded with the runtime's own codec, and the arrival time of each run's `completed` update.

import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { decodeLiveMessage, encodeClientMessage } from '../../../runtime/rooms/live-codec.ts';

export interface LiveWatcher {
  /** performance.now() when each run's first `completed` update arrived. */
  readonly completedAt: Map<string, number>;
  /** The server's `at_ms` (wall clock, same machine) of each run's `completed` update: unaffected by replay. */
  readonly completedAtServerMs: Map<string, number>;
  /** performance.now() arrival of the `completed` update, by the run's event id. */
  readonly completedByEvent: Map<string, number>;
  /** Updates received (every state), and frames that did not decode. */
  readonly updates: () => number;
  readonly badFrames: () => number;
  /** Called for each newly completed run. */
  onCompleted?: (runId: string, atMs: number, eventId: string) => void;
  /** Resolves when `count` runs completed; rejects at the deadline with how many did. */
  waitForCompleted(count: number, timeoutMs: number): Promise<void>;
  close(): void;
}

/** Connects and subscribes from `afterSeq` (0: every retained update, then live ones). */
export function watchLive(baseUrl: string, orgId: string, apiKey: string, afterSeq = 0): Promise<LiveWatcher> {
  const socket = new WebSocket(`${baseUrl.replace('http', 'ws')}/organizations/${orgId}/live?token=${encodeURIComponent(apiKey)}`);
  socket.binaryType = 'nodebuffer';
  const completedAt = new Map<string, number>();
  const completedAtServerMs = new Map<string, number>();
  const completedByEvent = new Map<string, number>();
  let updates = 0;
  let badFrames = 0;
  let waiter: { count: number; resolve: () => void } | undefined;
  const watcher: LiveWatcher = {
    completedAt,
    completedAtServerMs,
    completedByEvent,
    updates: () => updates,
    badFrames: () => badFrames,
    waitForCompleted: (count, timeoutMs) =>
      new Promise<void>((resolve, reject) => {
        if (completedAt.size >= count) return resolve();
        const timer = setTimeout(() => {
          waiter = undefined;
          reject(new Error(`${orgId}: ${completedAt.size} of ${count} runs completed within ${timeoutMs} ms`));
        }, timeoutMs);
        waiter = {
          count,
          resolve: () => {
            clearTimeout(timer);
            waiter = undefined;
            resolve();
          },
        };
      }),
    close: () => socket.terminate(),
  };
  socket.on('message', (data: Buffer) => {
    const at = performance.now();
    let message;
    try {
      message = decodeLiveMessage(new Uint8Array(data));
    } catch {
      badFrames += 1;
      return;
    }
    if (!('run_update' in message)) return;
    updates += 1;
    const update = message.run_update;
    if (update.state !== 'completed' || completedAt.has(update.run_id)) return;
    completedAt.set(update.run_id, at);
    completedAtServerMs.set(update.run_id, Number(update.at_ms));
    completedByEvent.set(update.event_id, at);
    watcher.onCompleted?.(update.run_id, at, update.event_id);
    if (waiter !== undefined && completedAt.size >= waiter.count) waiter.resolve();
  });
  return new Promise((resolve, reject) => {
    socket.once('open', () => {
      socket.send(encodeClientMessage({ subscribe: { after_seq: afterSeq, environment: 'production', run_id: '' } }));
      resolve(watcher);
    });
    socket.once('unexpected-response', (_req, res) => reject(new Error(`live room upgrade refused: ${res.statusCode ?? 'no status'}`)));
    socket.once('error', reject);
  });
}
