// The fan-out subscribers as the bench sees them: worker processes (harness children) that each hold
// a share of the sockets, driven round by round over their control ports, results merged here.

import { join } from 'node:path';
import type { ServerChild } from '../../harness/children.ts';
import type { ScenarioContext } from '../../scenario.ts';
import type { ConnectResult, SubscriberWorkerSpec, WorkerProgress, WorkerRoundResult } from './fanout-protocol.ts';
import { mergeSparse, type SparseLagHistogram } from './lag-histogram.ts';

export interface RoundResult {
  readonly subscribers: number;
  readonly updates: number;
  readonly measuredUpdates: number;
  /** Wall-clock ms span of the measured receipts, over every worker. */
  readonly measuredSpanMs: number;
  /** Updates received after the window opened, whenever stamped, and their wall-clock span (WorkerRoundResult). */
  readonly receivedInWindow: number;
  readonly receivedSpanMs: number;
  readonly heartbeats: number;
  readonly bytes: number;
  readonly complete: number;
  readonly closedByCode: Readonly<Record<string, number>>;
  readonly outOfOrder: number;
  readonly badFrames: number;
  readonly checkedFrames: number;
  readonly checkMismatches: number;
  readonly lag: SparseLagHistogram;
  /** CPU of each worker over the round, in cores. */
  readonly workerCpuCores: readonly number[];
}

export interface SubscriberPool {
  readonly workers: number;
  /** Opens `count` sockets to `url`, split evenly over the workers; rejects if any failed. */
  connect(url: string, count: number): Promise<void>;
  /** The slowest socket of all workers, in updates received this round. */
  progress(): Promise<WorkerProgress>;
  /** Updates stamped at or after `windowStartMs` (wall clock) are the measured ones. */
  start(windowStartMs: number): Promise<void>;
  /** Waits until every socket has `expected` updates (or `timeoutMs`), then closes the round's sockets. */
  finish(expected: number, timeoutMs: number): Promise<RoundResult>;
  stop(): Promise<void>;
}

export async function startSubscriberPool(context: ScenarioContext, workers: number, spec: SubscriberWorkerSpec): Promise<SubscriberPool> {
  const script = join(context.repoRoot, 'bench', 'scenarios', 'fanout', 'subscriber-worker.ts');
  const started = await Promise.allSettled(
    Array.from({ length: workers }, (_, i) =>
      context.children.startServer({
        name: `fan-out subscriber worker ${i + 1}`,
        command: process.execPath,
        args: ['--import', 'tsx', script, JSON.stringify(spec)],
        cwd: context.repoRoot,
        timeoutMs: 60_000,
      }),
    ),
  );
  const children = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failure = started.find((s) => s.status === 'rejected');
  if (failure !== undefined) {
    await Promise.all(children.map((c) => c.stop()));
    throw failure.reason;
  }
  let shares: number[] = [];
  const call = async <T>(child: ServerChild, method: string, path: string): Promise<T> => {
    const response = await fetch(`${child.baseUrl}${path}`, { method, signal: AbortSignal.timeout(600_000) });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`${child.name} ${path.split('?')[0] ?? ''}: ${response.status} ${text.slice(0, 300)}`);
    return JSON.parse(text) as T;
  };
  return {
    workers,
    connect: async (url, count) => {
      shares = children.map((_, i) => Math.floor(count / workers) + (i < count % workers ? 1 : 0));
      const results = await Promise.all(children.map((c, i) => call<ConnectResult>(c, 'POST', `/connect?url=${encodeURIComponent(url)}&count=${shares[i] ?? 0}`)));
      const failed = results.reduce((sum, r) => sum + r.failed, 0);
      if (failed > 0) throw new Error(`${failed} of ${count} subscribers could not connect: ${results.find((r) => r.firstError !== undefined)?.firstError ?? ''}`);
    },
    progress: async () => {
      const all = await Promise.all(children.map((c) => call<WorkerProgress>(c, 'GET', '/progress')));
      return {
        open: all.reduce((sum, p) => sum + p.open, 0),
        minUpdates: Math.min(...all.filter((p) => p.open > 0).map((p) => p.minUpdates), Number.POSITIVE_INFINITY),
        maxUpdates: Math.max(0, ...all.map((p) => p.maxUpdates)),
      };
    },
    start: async (windowStartMs) => {
      await Promise.all(children.map((c) => call<unknown>(c, 'POST', `/start?windowStartMs=${windowStartMs}`)));
    },
    finish: async (expected, timeoutMs) => mergeRounds(await Promise.all(children.map((c) => call<WorkerRoundResult>(c, 'POST', `/finish?expected=${expected}&timeoutMs=${timeoutMs}`)))),
    stop: async () => {
      await Promise.all(children.map((c) => c.stop()));
    },
  };
}

function mergeRounds(parts: readonly WorkerRoundResult[]): RoundResult {
  const sum = (pick: (p: WorkerRoundResult) => number): number => parts.reduce((total, p) => total + pick(p), 0);
  /** Wall-clock ms from the earliest first to the latest last over the workers that have them. */
  const span = (first: (p: WorkerRoundResult) => number | null, last: (p: WorkerRoundResult) => number | null): number => {
    const firsts = parts.flatMap((p) => first(p) ?? []);
    const lasts = parts.flatMap((p) => last(p) ?? []);
    return firsts.length === 0 || lasts.length === 0 ? 0 : Math.max(...lasts) - Math.min(...firsts);
  };
  const closedByCode: Record<string, number> = {};
  for (const p of parts) for (const [code, n] of Object.entries(p.closedByCode)) closedByCode[code] = (closedByCode[code] ?? 0) + n;
  return {
    subscribers: sum((p) => p.sockets),
    updates: sum((p) => p.updates),
    measuredUpdates: sum((p) => p.measuredUpdates),
    measuredSpanMs: span((p) => p.firstMeasuredAtMs, (p) => p.lastMeasuredAtMs),
    receivedInWindow: sum((p) => p.receivedInWindow),
    receivedSpanMs: span((p) => p.firstWindowReceiptAtMs, (p) => p.lastWindowReceiptAtMs),
    heartbeats: sum((p) => p.heartbeats),
    bytes: sum((p) => p.bytes),
    complete: sum((p) => p.complete),
    closedByCode,
    outOfOrder: sum((p) => p.outOfOrder),
    badFrames: sum((p) => p.badFrames),
    checkedFrames: sum((p) => p.checkedFrames),
    checkMismatches: sum((p) => p.checkMismatches),
    lag: mergeSparse(parts.map((p) => p.lag)),
    workerCpuCores: parts.map((p) => p.cpuCores),
  };
}
