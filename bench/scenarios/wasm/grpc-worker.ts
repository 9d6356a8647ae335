// Child process: the real hook-runner (spawned by the runtime's own supervisor, HookRunnerChild) and
// the runtime's gRPC client calling Invoke: recorded calls with distinct idempotency keys, sequential
// and concurrent, one sequential series of simulated calls (no invocation ledger) for contrast, and
// the two floors under a recorded call (floor-calls.ts).
//
// Usage: node --import tsx grpc-worker.ts '<WasmWorkerSpec JSON>'; prints one WasmWorkerResult line.

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { HookRunnerChild } from '../../../runtime/hook-runner/child.ts';
import { HookRunnerClient, type InvokeInput, type InvokeResult } from '../../../runtime/hook-runner/client.ts';
import { measureFloors } from './floor-calls.ts';
import { measureConcurrent, measureSequential, warmUp, type Call } from './measure-calls.ts';
import { parseWorkerSpec, printWorkerResult, type CallRun } from './wasm-protocol.ts';

const ORG = 'org_bench';

const describe = (result: InvokeResult): string =>
  result.outcome.kind === 'trap' ? `trap ${result.outcome.trap}: ${result.outcome.message}` : result.outcome.kind;

const spec = parseWorkerSpec();
if (spec.dataDir === undefined) throw new Error('the gRPC worker needs a dataDir for the hook-runner');
const token = randomBytes(24).toString('base64url');
const runnerLog: string[] = [];
const child = new HookRunnerChild({
  dataDir: spec.dataDir,
  token,
  masterKey: randomBytes(32).toString('hex'),
  log: (line) => void runnerLog.push(line),
});
const client = new HookRunnerClient(() => child.address(), token);
const runs: CallRun[] = [];
try {
  await child.start();
  for (const module of spec.modules) {
    const digest = await client.compile(readFileSync(module.file));
    const base: Omit<InvokeInput, 'idempotencyKey' | 'simulate'> = {
      orgId: ORG,
      actionId: module.actionId,
      digest,
      permissions: [],
      payloadJson: module.payloadJson,
      fence: 1,
    };
    // A fresh run id per call, as when every call is the first custom_action step of a new run:
    // the runner commits the run's fence with the result in one flushed write before it answers.
    const recorded = (series: string): Call => async (i) => {
      const result = await client.invoke({ ...base, idempotencyKey: `run_${module.name}_${series}_${i}:step_1` });
      return result.outcome.kind === 'output' && !result.replayed ? true : describe(result);
    };
    await warmUp(module.name, spec.warmup, recorded('warmup'));
    runs.push(await measureSequential(module.name, 'sequential', spec.samples, recorded('seq')));
    runs.push(await measureConcurrent(module.name, 'concurrent', spec.concurrentSamples, spec.concurrency, recorded('conc')));
    if (module.name === 'echo') {
      const simulate: Call = async () => {
        const result = await client.invoke({ ...base, idempotencyKey: '', simulate: true });
        return result.outcome.kind === 'output' ? true : describe(result);
      };
      runs.push(await measureSequential(module.name, 'simulate', spec.samples, simulate));
    }
  }
  // Roughly an Invoke request: the payload plus org, action, digest, key and fence.
  const requestBytes = Buffer.byteLength(spec.modules[0]?.payloadJson ?? '') + 160;
  runs.push(...(await measureFloors({ repoRoot: process.cwd(), dataDir: spec.dataDir, requestBytes, warmup: spec.warmup, samples: spec.samples })));
} catch (error) {
  throw new Error(`${error instanceof Error ? error.message : String(error)}\nhook-runner log:\n${runnerLog.slice(-20).join('\n')}`, { cause: error });
} finally {
  client.close();
  await child.stop();
}
printWorkerResult({ runs });
