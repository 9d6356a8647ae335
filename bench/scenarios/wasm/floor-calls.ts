// The two floors under a recorded Invoke, measured next to it in the gRPC worker: a bare grpc-js
// round trip to another process (bench/peers/grpc-echo.ts), and one small LMDB write committed and
// flushed by a single writer. A recorded call cannot answer faster than the two together.

import { join } from 'node:path';
import { makeGenericClientConstructor, credentials } from '@grpc/grpc-js';
import { open } from 'lmdb';
import { ChildProcesses } from '../../harness/children.ts';
import { ECHO_SERVICE } from '../../peers/grpc-echo.ts';
import { measureSequential, warmUp, type Call } from './measure-calls.ts';
import type { CallRun } from './wasm-protocol.ts';

export interface FloorSpec {
  readonly repoRoot: string;
  readonly dataDir: string;
  /** Request bytes of the gRPC echo (the size of a typical Invoke request). */
  readonly requestBytes: number;
  readonly warmup: number;
  readonly samples: number;
}

export async function measureFloors(spec: FloorSpec): Promise<CallRun[]> {
  return [await measureGrpcFloor(spec), await measureFlushFloor(spec)];
}

async function measureGrpcFloor(spec: FloorSpec): Promise<CallRun> {
  const children = new ChildProcesses();
  const undoSignals = children.killOnSignals();
  try {
    const server = await children.startServer({
      name: 'grpc-echo',
      command: process.execPath,
      args: ['--import', 'tsx', join(spec.repoRoot, 'bench', 'peers', 'grpc-echo.ts')],
      cwd: spec.repoRoot,
      timeoutMs: 30_000,
    });
    const EchoClient = makeGenericClientConstructor(ECHO_SERVICE, 'Floor');
    const client = new EchoClient(`127.0.0.1:${server.port}`, credentials.createInsecure()) as unknown as {
      Echo(request: Buffer, done: (error: Error | null, reply?: Buffer) => void): void;
      close(): void;
    };
    const request = Buffer.alloc(spec.requestBytes, 0x61);
    const echo: Call = () =>
      new Promise((resolve) => client.Echo(request, (error, reply) => resolve(error !== null ? error.message : reply?.length === request.length ? true : 'short reply')));
    try {
      await warmUp('grpc-echo', spec.warmup, echo);
      return await measureSequential('grpc-echo', 'floor', spec.samples, echo);
    } finally {
      client.close();
    }
  } finally {
    await children.stopAll();
    undoSignals();
  }
}

async function measureFlushFloor(spec: FloorSpec): Promise<CallRun> {
  const root = open({ path: join(spec.dataDir, 'flush-floor'), compression: false, overlappingSync: true, separateFlushed: true });
  const record = { outcome: { kind: 'output', outputJson: '{"ok":true}' }, fuelUsed: 100 };
  let written = 0;
  const write: Call = async () => {
    written += 1;
    const put = root.put(['org_bench', `run_${written}:step_1`], record) as Promise<boolean> & { flushed?: PromiseLike<unknown> };
    await put;
    await (put.flushed ?? root.flushed);
    return true;
  };
  try {
    await warmUp('lmdb-flush', spec.warmup, write);
    return await measureSequential('lmdb-flush', 'floor', spec.samples, write);
  } finally {
    await root.close();
  }
}
