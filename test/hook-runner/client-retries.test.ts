// The runtime's hook-runner client against a real gRPC server that answers as scripted: a runner
// that refuses a call (its disk below its floor) or answers that its store could not confirm a write
// is not retried at once, and the refusal means
// "never sent" only when no earlier attempt of the same call may have reached the runner. A call
// withdrawn before it could leave (its address still awaited, its channel still connecting) says so.
// A runner without ForgetOrg (an earlier release) is told apart from a failing one. A call waits
// for a runner (re)starting RUNNER_WAIT_MS in all, not that much again at each attempt.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Metadata, Server, ServerCredentials, status, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import { loadHookRunnerService, SLUICE_CODE_METADATA_KEY } from '../../hook-runner/wire.ts';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { createServer } from 'node:net';
import { CallNotSentError, CallWithdrawnError, RunnerUnavailableError } from '../../runtime/hook-runner/runner-errors.ts';
import { RetryableError } from '../../runtime/errors.ts';

type Answer = 'dropped' | 'disk_full' | 'write_unconfirmed' | 'module_recompile_timeout';

/** A server whose Invoke answers each call with the next of `answers`; resolves with it and its calls so far. */
async function scriptedRunner(answers: Answer[], others: Record<string, (call: ServerUnaryCall<unknown, unknown>, answer: sendUnaryData<unknown>) => void> = {}): Promise<{ client: HookRunnerClient; calls: () => number; close: () => void }> {
  let calls = 0;
  const server = new Server();
  server.addService(loadHookRunnerService() as never, {
    ...others,
    Invoke: (_call: ServerUnaryCall<unknown, unknown>, answer: sendUnaryData<unknown>) => {
      const next = answers[calls++] ?? 'disk_full';
      if (next === 'dropped') return answer({ code: status.UNAVAILABLE, details: 'the connection dropped mid-call' });
      const metadata = new Metadata();
      metadata.set(SLUICE_CODE_METADATA_KEY, next.startsWith('module_') ? next : `hook_runner_${next}`);
      return answer({ code: status.UNAVAILABLE, details: next === 'disk_full' ? "The hook-runner's disk is nearly full" : 'The hook-runner stored this, but its disk could not confirm it', metadata });
    },
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))));
  const client = new HookRunnerClient(`127.0.0.1:${port}`, 'runner-token-for-scripted-tests', { sleep: async () => undefined });
  return { client, calls: () => calls, close: () => { client.close(); server.forceShutdown(); } };
}

const invoke = (client: HookRunnerClient) =>
  client.invoke({ orgId: 'org_a', actionId: 'act_a', digest: 'd'.repeat(64), permissions: [], payloadJson: '{}', idempotencyKey: 'run_a:step', fence: 1 });

/** The runner answers the first call with `answer`: the call rejects as `expected` says, and the runner was asked once. */
async function askedOnce(answer: Answer, expected: (error: unknown) => boolean): Promise<void> {
  const runner = await scriptedRunner([answer]);
  try {
    await assert.rejects(invoke(runner.client), expected);
    assert.equal(runner.calls(), 1);
  } finally {
    runner.close();
  }
}

test('a refusal at the first attempt is a call never sent, not retried at once', () =>
  askedOnce('disk_full', (error) => error instanceof CallNotSentError && error.code === 'hook_runner_disk_full' && error.retryAfterMs === 5000));

test('a store write the runner could not confirm on disk is its answer: 503 write_unconfirmed with a 5 s retry, not retried at once', () =>
  askedOnce('write_unconfirmed', (error) => error instanceof RetryableError && error.code === 'write_unconfirmed' && error.retryAfterMs === 5000));

test('a module past the compile deadline compiling again is the runner\'s answer: retryable, not asked again at once (each ask would spend the deadline again)', () =>
  askedOnce('module_recompile_timeout', (error) => error instanceof RetryableError && error.code === 'module_recompile_timeout'));

test('a refusal after an attempt lost mid-call is not taken as never sent: that attempt may have run', async () => {
  const runner = await scriptedRunner(['dropped', 'disk_full']);
  try {
    await assert.rejects(invoke(runner.client), (error: unknown) => error instanceof RunnerUnavailableError && error.mayHaveRun && /may have taken an earlier attempt/.test(error.message));
    assert.equal(runner.calls(), 2);
  } finally {
    runner.close();
  }
});

test('a call withdrawn before it could leave is reported as never sent: while its address was awaited, or while its channel was still connecting', async () => {
  const input = { orgId: 'org_a', actionId: 'act_a', digest: 'd'.repeat(64), permissions: [], payloadJson: '{}', idempotencyKey: 'run_a:step', fence: 1 };
  const withdrawn = (error: unknown): boolean => error instanceof CallWithdrawnError && !error.mayHaveRun;
  // A TCP listener that never speaks HTTP/2: the channel stays connecting.
  const silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const silentAddress = `127.0.0.1:${(silent.address() as { port: number }).port}`;
  try {
    const awaitingAddress = new AbortController();
    const restarting = new HookRunnerClient(async () => {
      awaitingAddress.abort(); // the run left the attempt while the runner was restarting
      return silentAddress;
    }, 'runner-token-for-scripted-tests', { sleep: async () => undefined });
    await assert.rejects(restarting.invoke({ ...input, signal: awaitingAddress.signal }), withdrawn);
    restarting.close();

    const connecting = new HookRunnerClient(silentAddress, 'runner-token-for-scripted-tests', { sleep: async () => undefined });
    const leaving = new AbortController();
    const call = connecting.invoke({ ...input, signal: leaving.signal });
    setImmediate(() => leaving.abort());
    await assert.rejects(call, withdrawn);
    connecting.close();
  } finally {
    silent.close();
  }
});

test('a runner of an earlier release, without ForgetOrg, answers UNIMPLEMENTED: forgetOrg resolves undefined instead of failing', async () => {
  const runner = await scriptedRunner([]);
  try {
    assert.equal(await runner.client.forgetOrg('org_a'), undefined);
  } finally {
    runner.close();
  }
  // Any other refusal of ForgetOrg is still one.
  const full = await scriptedRunner([], {
    ForgetOrg: (_call, answer) => {
      const metadata = new Metadata();
      metadata.set(SLUICE_CODE_METADATA_KEY, 'hook_runner_disk_full');
      answer({ code: status.UNAVAILABLE, details: "The hook-runner's disk is nearly full", metadata });
    },
  });
  try {
    await assert.rejects(full.client.forgetOrg('org_a'), (error: unknown) => error instanceof CallNotSentError && error.code === 'hook_runner_disk_full');
  } finally {
    full.close();
  }
});

test('a call waits for a runner restarting at most its runner wait in all, across attempts, and says so', async () => {
  // A port that refuses: the runner became ready just as each wait ended, and was gone again.
  const refusing = createServer();
  const port = await new Promise<number>((resolve) => refusing.listen(0, '127.0.0.1', () => resolve((refusing.address() as { port: number }).port)));
  await new Promise<void>((resolve) => refusing.close(() => resolve()));
  const asked: number[] = [];
  const address = async (waitMs: number): Promise<string> => {
    asked.push(waitMs);
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    return `127.0.0.1:${port}`;
  };
  const client = new HookRunnerClient(address, 'runner-token-for-scripted-tests', { runnerWaitMs: 300, sleep: async () => undefined });
  try {
    await assert.rejects(invoke(client), (error: unknown) => error instanceof RunnerUnavailableError && /did not become ready within 300 ms, over 1 attempt \(Invoke\)/.test(error.message));
    assert.deepEqual(asked, [300], 'one wait of the whole budget; no attempt waits again');
  } finally {
    client.close();
  }
});
