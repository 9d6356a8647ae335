// Scenario wasm-invoke: latency and throughput of one custom-action call, for a trivial echo and the
// order-risk-scorer, through the addon in-process, the hook-runner over gRPC, and Node's WebAssembly.

import { join } from 'node:path';
import { chooseThreadPoolSize } from '../../../hook-runner/thread-pool.ts';
import { failedResult, judge, measuredRow, scenarioStatus, type SystemMeta } from '../../result-helpers.ts';
import type { PeerRatio, Scenario, ScenarioContext, ScenarioReport, SystemResult } from '../../scenario.ts';
import { prepareGuests, type WasmGuests } from './wasm-modules.ts';
import type { CallRun, WasmWorkerResult, WasmWorkerSpec } from './wasm-protocol.ts';
import { wasmSizes, workerTimeoutMs, type WasmSizes } from './wasm-sizes.ts';

export const wasmScenario: Scenario = {
  name: 'wasm-invoke',
  title: 'WASM custom action: one invocation through the addon, the hook-runner (gRPC) and Node',
  run: runWasm,
};

type WorkerName = 'addon' | 'grpc' | 'node';

interface Worker {
  readonly name: WorkerName;
  readonly entry: string;
  readonly failedMeta: SystemMeta;
}

const WORKERS: readonly Worker[] = [
  {
    name: 'addon',
    entry: join('bench', 'scenarios', 'wasm', 'addon-worker.ts'),
    failedMeta: { system: 'addon', label: 'Sluice addon (runModule, in-process)', role: 'subject', work: 'runModule' },
  },
  {
    name: 'grpc',
    entry: join('bench', 'scenarios', 'wasm', 'grpc-worker.ts'),
    failedMeta: { system: 'hook-runner', label: 'Sluice hook-runner (Invoke over gRPC)', role: 'subject', work: 'Invoke' },
  },
  {
    name: 'node',
    entry: join('bench', 'peers', 'node-webassembly.ts'),
    failedMeta: { system: 'node-webassembly', label: 'Node WebAssembly (no fuel, no isolation)', role: 'peer', work: 'WebAssembly.Instance + call' },
  },
];

async function runWasm(context: ScenarioContext): Promise<ScenarioReport> {
  const sizes = wasmSizes(context.quick);
  context.log('wasm-invoke: assembling the echo and loop guests, building order-risk-scorer (kits/build.mjs assemblyscript)');
  const guests = await prepareGuests(context);
  const systems: SystemResult[] = [];
  const workerNotes: string[] = [];
  for (const worker of WORKERS) {
    try {
      context.log(`wasm-invoke: ${worker.failedMeta.label}`);
      const result = await runWorker(context, worker, workerSpec(context, worker.name, guests, sizes));
      systems.push(...result.runs.map((run) => toSystem(worker.name, run)));
      workerNotes.push(...(result.notes ?? []));
    } catch (error) {
      systems.push(failedResult(worker.failedMeta, error));
    }
  }
  const find = (system: string): SystemResult | undefined => measuredRow(systems, system);
  const grpcEcho = find('hook-runner-echo-sequential');
  const addonEcho = find('addon-echo-sequential');
  return {
    scenario: wasmScenario.name,
    title: wasmScenario.title,
    status: scenarioStatus(systems),
    unit: 'invokes/s',
    method: [
      `guests: echo (WAT, returns its input envelope) and order-risk-scorer (AssemblyScript kit, built by kits/build.mjs); input: the README's sample order in the hook-runner's envelope (${guests.modules[0]?.envelope.length ?? 0} B)`,
      `latency: ${sizes.samples} sequential calls per module in-process, ${sizes.grpcSamples} over gRPC, after ${sizes.warmup} / ${sizes.grpcWarmup} warm-up calls; "1 caller" rows: throughput = calls / wall time of that sequential series`,
      `throughput: ${sizes.concurrentSamples} (in-process) / ${sizes.grpcConcurrentSamples} (gRPC) calls with ${sizes.concurrency} in flight; p50/p99 of those rows are per-call latency under that load`,
      'each system in its own process: the addon worker, the gRPC client worker (which supervises a real hook-runner child through runtime/hook-runner/child.ts), the Node peer',
    ],
    systems,
    ratios: wasmRatios(systems),
    latencyCurve: [],
    targets: [
      judge('wasm.grpc_invoke_p50', 'hook-runner Invoke p50 <= 200 us (trivial echo, recorded, 1 caller)', grpcEcho?.p50Ms, (v) => v <= 0.2, micros),
      judge('wasm.addon_run_p50', 'addon runModule p50 <= 30 us (trivial echo, 1 caller)', addonEcho?.p50Ms, (v) => v <= 0.03, micros),
    ],
    notes: [
      'A recorded Invoke (what a run step does) answers only after one flushed LMDB write in the runner: the result under its idempotency key together with the run\'s fence (a new run id per call here). The "simulate" row is the same call with no ledger: the difference is the cost of durability.',
      'The addon runs each call on a fresh Wasmtime store from a pooling allocator with fuel metering: inline on the event loop while the run fits a small fuel slice (echo and scorer do), else started over on the libuv thread pool with the full limits; the Node peer calls V8 synchronously on the main thread with neither fuel nor memory limits, so it is the floor, not a like-for-like competitor.',
      'Node "reused instance" rows skip instantiation; the guests\' bump allocators never free, so memory grows over the series (a few MB).',
      ...workerNotes,
      ...hopNotes(systems),
      ...floorNotes(systems),
      ...ratioNotes(systems),
    ],
  };
}

function workerSpec(context: ScenarioContext, worker: WorkerName, guests: WasmGuests, sizes: WasmSizes): WasmWorkerSpec {
  if (worker === 'grpc') {
    return {
      modules: guests.modules,
      warmup: sizes.grpcWarmup,
      samples: sizes.grpcSamples,
      concurrentSamples: sizes.grpcConcurrentSamples,
      concurrency: sizes.concurrency,
      dataDir: context.tempDirs.make('hook-runner'),
    };
  }
  return {
    modules: guests.modules,
    warmup: sizes.warmup,
    samples: sizes.samples,
    concurrentSamples: sizes.concurrentSamples,
    concurrency: sizes.concurrency,
    ...(worker === 'addon' ? { loopFile: guests.loopFile, loopSamples: sizes.loopSamples } : {}),
  };
}

async function runWorker(context: ScenarioContext, worker: Worker, spec: WasmWorkerSpec): Promise<WasmWorkerResult> {
  const calls = spec.modules.length * (spec.warmup + 2 * spec.samples + spec.concurrentSamples);
  const value = await context.children.runJson({
    name: `wasm-invoke ${worker.name}`,
    command: process.execPath,
    args: ['--import', 'tsx', join(context.repoRoot, worker.entry), JSON.stringify(spec)],
    cwd: context.repoRoot,
    env: { UV_THREADPOOL_SIZE: String(chooseThreadPoolSize()) },
    timeoutMs: workerTimeoutMs(calls) + (spec.loopSamples ?? 0) * 2000,
  });
  const result = value as Partial<WasmWorkerResult>;
  if (!Array.isArray(result.runs) || result.runs.length === 0) throw new Error(`unexpected worker result: ${JSON.stringify(value).slice(0, 200)}`);
  return result as WasmWorkerResult;
}

const MODULE_LABEL: Readonly<Record<string, string>> = { echo: 'echo', scorer: 'order-risk-scorer', 'endless-loop': 'endless loop' };

function describeRun(worker: WorkerName, run: CallRun): SystemMeta {
  const module = MODULE_LABEL[run.module] ?? run.module;
  const callers = run.concurrency === 1 ? '1 caller' : `${run.concurrency} in flight`;
  switch (worker) {
    case 'addon':
      if (run.module === 'pool-hop') {
        return { system: 'libuv-pool-hop', label: 'libuv thread-pool round trip, no wasm (what the pool path adds)', role: 'peer', work: 'crypto.randomFill of 1 byte: the same hop to a libuv thread and back that runModule makes when a run outgrows the inline fuel slice, with no work' };
      }
      if (run.mode === 'fuel-stop') {
        return { system: 'addon-fuel-stop', label: 'addon: endless loop stopped by fuel', role: 'subject', work: 'runModule of (loop (br 0)) until 50,000,000 units of fuel run out (trap out_of_fuel) on the libuv thread pool (the first call first spends the inline slice); latency = wall time to the trap' };
      }
      return { system: `addon-${run.module}-${run.mode}`, label: `addon runModule, ${module}, ${callers}`, role: 'subject', work: 'compiled once; per call a fresh store (pooling allocator), fuel 50M, 10 MiB memory, input via alloc, output read to NUL; inline on the event loop (these guests fit the inline fuel slice), so no thread-pool hop' };
    case 'grpc':
      if (run.mode === 'simulate') {
        return { system: `hook-runner-${run.module}-simulate`, label: `hook-runner Invoke simulate (no ledger), ${module}, ${callers}`, role: 'subject', work: 'Invoke with simulate=true: gRPC round trip, request parsing, envelope, sandbox run; no fence, no result record' };
      }
      if (run.module === 'grpc-echo') {
        return { system: 'grpc-floor', label: 'grpc-js unary echo to another process, no work (transport floor)', role: 'peer', work: 'bench/peers/grpc-echo.ts: a bare @grpc/grpc-js server echoing an Invoke-sized request; no auth, parsing, sandbox or storage' };
      }
      if (run.module === 'lmdb-flush') {
        return { system: 'lmdb-flush-floor', label: 'LMDB: one small write committed and flushed, 1 writer (durability floor)', role: 'peer', work: 'lmdb-js put of an invocation-sized record, then its flush (overlappingSync, as the runner); nothing else' };
      }
      return { system: `hook-runner-${run.module}-${run.mode}`, label: `hook-runner Invoke, ${module}, ${callers}`, role: 'subject', work: 'HookRunnerClient.invoke -> real hook-runner child: parse, stale-fence check, sandbox run, result and the run\'s fence in one flushed write, reply' };
    case 'node':
      return run.mode === 'reused'
        ? { system: `node-webassembly-${run.module}-reused`, label: `Node WebAssembly, ${module}, reused instance (call only)`, role: 'peer', work: 'same ABI on one long-lived instance: alloc, copy in, execute, read to NUL; no fuel, no limits' }
        : { system: `node-webassembly-${run.module}-instantiate`, label: `Node WebAssembly, ${module}, new instance per call`, role: 'peer', work: 'new WebAssembly.Instance of the precompiled module per call, then the same ABI; no fuel, no limits' };
  }
}

function toSystem(worker: WorkerName, run: CallRun): SystemResult {
  return {
    ...describeRun(worker, run),
    status: 'measured',
    throughputPerSec: run.throughputPerSec,
    completed: run.completed,
    accepted: run.ok,
    errors: run.completed - run.ok,
    durationSec: run.durationSec,
    ...(run.p50Ms === undefined ? {} : { p50Ms: run.p50Ms }),
    ...(run.p99Ms === undefined ? {} : { p99Ms: run.p99Ms }),
    ...(run.firstError === undefined ? {} : { note: `first unexpected outcome: ${run.firstError.slice(0, 200)}` }),
  };
}

/** Only like with like: the addon's sequential series against Node on the same module. */
const RATIO_PAIRS = ['echo', 'scorer'].flatMap((module) =>
  ['instantiate', 'reused'].map((mode) => ({ subject: `addon-${module}-sequential`, peer: `node-webassembly-${module}-${mode}` })),
);

function wasmRatios(systems: readonly SystemResult[]): PeerRatio[] {
  const throughput = (name: string): number | undefined => measuredRow(systems, name)?.throughputPerSec;
  return RATIO_PAIRS.flatMap(({ subject, peer }) => {
    const a = throughput(subject);
    const b = throughput(peer);
    return a === undefined || b === undefined || b === 0 ? [] : [{ subject, peer, ratio: a / b }];
  });
}

function ratioNotes(systems: readonly SystemResult[]): string[] {
  return wasmRatios(systems).map((r) => `${r.subject} / ${r.peer}: ${r.ratio.toFixed(2)}x the calls per second (1 caller each)`);
}

/** What the thread-pool hop alone costs, next to the inline echo: on a VM it swings with thread wake-up latency. */
function hopNotes(systems: readonly SystemResult[]): string[] {
  const p50 = (name: string): number | undefined => measuredRow(systems, name)?.p50Ms;
  const hop = p50('libuv-pool-hop');
  const echo = p50('addon-echo-sequential');
  if (hop === undefined || echo === undefined) return [];
  return [`addon echo p50 ${micros(echo)} (inline, no hop); the bare libuv thread-pool round trip is ${micros(hop)} (p50): what runModule adds when a run outgrows the inline fuel slice, varying with how fast an idle pool thread wakes on this machine`];
}

/** A recorded Invoke pays a cross-process gRPC round trip and one flushed write at least. */
function floorNotes(systems: readonly SystemResult[]): string[] {
  const p50 = (name: string): number | undefined => measuredRow(systems, name)?.p50Ms;
  const grpc = p50('grpc-floor');
  const flush = p50('lmdb-flush-floor');
  const recorded = p50('hook-runner-echo-sequential');
  if (grpc === undefined || flush === undefined || recorded === undefined) return [];
  return [
    `floor of a recorded Invoke on this machine: bare gRPC round trip ${micros(grpc)} + one flushed LMDB write ${micros(flush)} = ${micros(grpc + flush)} (p50s); the recorded echo took ${micros(recorded)}, so Sluice's own work per call is about ${micros(Math.max(0, recorded - grpc - flush))}`,
  ];
}

function micros(ms: number): string {
  return `${Math.round(ms * 1000)} us`;
}
