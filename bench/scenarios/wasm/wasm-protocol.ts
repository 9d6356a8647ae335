// What the wasm scenario hands its three measuring processes (addon, gRPC client, Node peer) and
// what each prints back: one JSON spec in argv, one JSON line of call runs on stdout.

/** One guest module, compiled once per process, and the exact envelope the host gives it. */
export interface WasmModuleSpec {
  readonly name: 'echo' | 'scorer';
  readonly file: string;
  /** The event payload (what the runtime sends over gRPC). */
  readonly payloadJson: string;
  /** The guest envelope the hook-runner builds from that payload, byte for byte (for in-process runs). */
  readonly envelope: string;
  /** Action id of the envelope, so the gRPC run builds the same bytes. */
  readonly actionId: string;
}

export interface WasmWorkerSpec {
  readonly modules: readonly WasmModuleSpec[];
  readonly warmup: number;
  /** Sequential calls per module (latency). */
  readonly samples: number;
  /** Calls per module with `concurrency` in flight (throughput). */
  readonly concurrentSamples: number;
  readonly concurrency: number;
  /** The endless-loop guest, for the fuel stop (addon only). */
  readonly loopFile?: string;
  readonly loopSamples?: number;
  /** Where the gRPC worker puts the hook-runner's data dir. */
  readonly dataDir?: string;
}

/** One measured series of calls of one module in one mode. */
export interface CallRun {
  readonly module: string;
  /** e.g. `sequential`, `concurrent`, `instantiate`, `reused`, `simulate`, `fuel-stop`. */
  readonly mode: string;
  readonly concurrency: number;
  readonly completed: number;
  /** Calls that ended the expected way (output; for the fuel stop: out_of_fuel). */
  readonly ok: number;
  readonly durationSec: number;
  readonly throughputPerSec: number;
  readonly p50Ms?: number;
  readonly p99Ms?: number;
  /** The first unexpected outcome, for the report. */
  readonly firstError?: string;
}

export interface WasmWorkerResult {
  readonly runs: readonly CallRun[];
  readonly notes?: readonly string[];
}

export function parseWorkerSpec(argv: readonly string[] = process.argv.slice(2)): WasmWorkerSpec {
  const text = argv[0];
  if (text === undefined) throw new Error('usage: <worker> \'<WasmWorkerSpec JSON>\'');
  return JSON.parse(text) as WasmWorkerSpec;
}

export function printWorkerResult(result: WasmWorkerResult): void {
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
