// Child process: Sluice's Wasmtime addon called in-process (`runModule`, fresh store per call, fuel
// and memory limits), sequential and concurrent, plus how long fuel takes to stop an endless loop.
// runModule picks its own path (inline on the event loop, or the libuv pool past the fuel slice).
//
// Usage: node --import tsx addon-worker.ts '<WasmWorkerSpec JSON>'; prints one WasmWorkerResult line.

import { randomFill } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { compileModule, type SandboxOutcome } from '../../../hook-runner/sandbox.ts';
import { INLINE_FUEL_SLICE, runModule } from '../../../hook-runner/sandbox-run.ts';
import { measureConcurrent, measureSequential, warmUp, type Call } from './measure-calls.ts';
import { parseWorkerSpec, printWorkerResult, type CallRun } from './wasm-protocol.ts';

const describe = (outcome: SandboxOutcome): string =>
  outcome.kind === 'trap' ? `trap ${outcome.trap}: ${outcome.message}` : outcome.kind;

const spec = parseWorkerSpec();
const runs: CallRun[] = [];

// What runModule's thread-pool path adds to a run: one round trip through the libuv thread pool
// doing nothing (randomFill of one byte runs there too), so the row shows what the hop costs here.
const hopBuffer = new Uint8Array(1);
const hop: Call = () => new Promise((resolve) => randomFill(hopBuffer, (error) => resolve(error === null ? true : error.message)));
await warmUp('pool-hop', spec.warmup, hop);
runs.push(await measureSequential('pool-hop', 'sequential', spec.samples, hop));
for (const module of spec.modules) {
  const compiled = compileModule(readFileSync(module.file));
  const call: Call = async () => {
    const outcome = await runModule(compiled, module.envelope);
    return outcome.kind === 'output' && outcome.output.length > 0 ? true : describe(outcome);
  };
  await warmUp(module.name, spec.warmup, call);
  runs.push(await measureSequential(module.name, 'sequential', spec.samples, call));
  runs.push(await measureConcurrent(module.name, 'concurrent', spec.concurrentSamples, spec.concurrency, call));
}

if (spec.loopFile !== undefined) {
  const loop = compileModule(readFileSync(spec.loopFile));
  // Wall time of the whole call: the full 50,000,000 units of fuel, burnt by `(loop (br 0))`. Only the
  // first (warm-up-free) call tries the inline slice first; runModule then sends the module to the pool.
  runs.push(
    await measureSequential('endless-loop', 'fuel-stop', spec.loopSamples ?? 1, async () => {
      const outcome = await runModule(loop, '{}');
      return outcome.kind === 'trap' && outcome.trap === 'out_of_fuel' ? true : describe(outcome);
    }),
  );
}

printWorkerResult({
  runs,
  notes: [
    `addon: runModule runs inline on the event loop up to ${INLINE_FUEL_SLICE.toLocaleString('en-US')} units of fuel, past that on a libuv thread pool of ${process.env['UV_THREADPOOL_SIZE'] ?? '4 (default)'} threads`,
  ],
});
