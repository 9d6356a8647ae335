// Peer, the floor of the wasm scenario: Node's own WebAssembly (V8) calling the same modules through
// the same guest ABI (DESIGN 6.5) in-process, with no fuel, no memory cap and no isolation.
//
// Child process. Usage: node --import tsx node-webassembly.ts '<WasmWorkerSpec JSON>'; prints one line.

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { summarizeLatencies } from '../harness/stats.ts';
import { parseWorkerSpec, printWorkerResult, type CallRun } from '../scenarios/wasm/wasm-protocol.ts';

const PAGE = 65_536;
const MAX_OUTPUT_BYTES = 256 * 1024;
const decoder = new TextDecoder('utf-8', { fatal: true });

// The project's TS lib has no DOM, where the WebAssembly types live: declare the members used.
interface GuestMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
type CompiledWasm = object & { readonly __compiled: unique symbol };
declare const WebAssembly: {
  readonly Module: new (bytes: Uint8Array) => CompiledWasm;
  readonly Instance: new (module: CompiledWasm, imports: object) => { readonly exports: object };
};

interface GuestExports {
  readonly memory: GuestMemory;
  readonly execute: (ptr: number, len: number) => number;
  readonly alloc?: (len: number) => number;
}

/** The host half of the ABI: place the input (alloc or fresh pages), execute, read to the NUL. */
function callGuest(exports: GuestExports, input: Uint8Array): string | undefined {
  let ptr: number;
  if (exports.alloc === undefined) {
    ptr = exports.memory.grow(Math.max(1, Math.ceil(input.length / PAGE))) * PAGE;
  } else {
    ptr = exports.alloc(input.length);
  }
  new Uint8Array(exports.memory.buffer, ptr, input.length).set(input);
  const out = exports.execute(ptr, input.length);
  if (out === 0) return undefined;
  const memory = new Uint8Array(exports.memory.buffer);
  const end = memory.indexOf(0, out);
  if (end < 0 || end - out > MAX_OUTPUT_BYTES) throw new Error('no NUL within the output limit');
  return decoder.decode(memory.subarray(out, end));
}

const instantiate = (module: CompiledWasm): GuestExports => new WebAssembly.Instance(module, {}).exports as unknown as GuestExports;

/** Synchronous on purpose: an await per call would add the event loop to the floor. */
function measure(name: string, mode: string, count: number, call: () => string | undefined): CallRun {
  const latencies = new Float64Array(count);
  let ok = 0;
  let firstError: string | undefined;
  const started = performance.now();
  for (let i = 0; i < count; i += 1) {
    const t0 = performance.now();
    let outcome: string | undefined;
    try {
      outcome = call();
    } catch (error) {
      firstError ??= error instanceof Error ? error.message : String(error);
    }
    latencies[i] = performance.now() - t0;
    if (outcome !== undefined && outcome.length > 0) ok += 1;
    else firstError ??= 'rejected or empty output';
  }
  const durationSec = (performance.now() - started) / 1000;
  const summary = summarizeLatencies(latencies, count);
  return {
    module: name,
    mode,
    concurrency: 1,
    completed: count,
    ok,
    durationSec,
    throughputPerSec: count / durationSec,
    ...(summary === undefined ? {} : { p50Ms: summary.p50Ms, p99Ms: summary.p99Ms }),
    ...(firstError === undefined ? {} : { firstError }),
  };
}

const spec = parseWorkerSpec();
const runs: CallRun[] = [];
for (const module of spec.modules) {
  const compiled = new WebAssembly.Module(readFileSync(module.file));
  const input = Buffer.from(module.envelope, 'utf8');
  // A fresh instance per call mirrors the sandbox's fresh store per call.
  const fresh = (): string | undefined => callGuest(instantiate(compiled), input);
  measure(module.name, 'warmup', spec.warmup, fresh);
  runs.push(measure(module.name, 'instantiate', spec.samples, fresh));
  // One instance for every call: the bump allocators of these guests never free, so memory grows.
  const reused = instantiate(compiled);
  const again = (): string | undefined => callGuest(reused, input);
  measure(module.name, 'warmup', Math.min(spec.warmup, spec.samples), again);
  runs.push(measure(module.name, 'reused', spec.samples, again));
}
printWorkerResult({ runs, notes: ['Node WebAssembly: one thread, synchronous calls, compiled once per module'] });
