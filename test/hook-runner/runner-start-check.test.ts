// A runtime started with --runner <host:port> asks that runner for its health at once and logs what
// is wrong: nothing listening there (and each later call that gives up on it, throttled), a gRPC
// server that is no hook-runner, a runner that cannot run guests; a working runner is not mentioned.

import assert from 'node:assert/strict';
import { createServer as createTcpServer } from 'node:net';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { after, describe, it } from 'node:test';
import { loadRunnerToken } from '../../hook-runner/runner-token.ts';
import { createHookRunnerServer } from '../../hook-runner/server.ts';
import { loadRuntimeConfig } from '../../runtime/config.ts';
import { connectRunner } from '../../runtime/hook-runner/connect-runner.ts';
import { createLogger } from '../../runtime/log.ts';
import { tempDataDir } from '../helpers/hook-runner.ts';

/** A loopback port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

/** Connects a runtime's runner client to `address` and collects its warnings (JSON lines). */
async function connected(address: string, dataDir = tempDataDir()): Promise<{ lines: string[]; checked: Promise<void>; close: () => Promise<void>; call: () => Promise<unknown> }> {
  const lines: string[] = [];
  const connection = await connectRunner(loadRuntimeConfig(['--data-dir', dataDir, '--runner', address], {}), createLogger('warn', (line) => void lines.push(line)));
  return {
    lines,
    checked: connection.startChecked ?? assert.fail('no start check'),
    close: () => connection.close(),
    call: () => connection.client?.listSecretKeys({ orgId: 'org_a', actionId: 'act' }) ?? assert.fail('no client'),
  };
}

interface WarnLine { readonly message: string; readonly runner?: string; readonly reason?: string }

const said = (lines: readonly string[], text: string): WarnLine[] =>
  lines.map((line) => JSON.parse(line) as WarnLine).filter((line) => line.message.includes(text));

/** The one line saying `text`, failing when there is none or more. */
function saidOnce(lines: readonly string[], text: string): Required<WarnLine> {
  const found = said(lines, text);
  assert.equal(found.length, 1, lines.join('\n'));
  const [line] = found as [WarnLine];
  return { message: line.message, runner: line.runner ?? '', reason: line.reason ?? '' };
}

const toClose: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of toClose) await close();
});

describe('the runtime reaching a hook-runner at an address', () => {
  it('says when nothing listens there, at start and when a call gives up, with the address and why', async () => {
    const address = `127.0.0.1:${await closedPort()}`;
    const runtime = await connected(address);
    toClose.push(runtime.close);
    await runtime.checked;
    const line = saidOnce(runtime.lines, 'the hook-runner cannot be reached');
    assert.equal(line.runner, address);
    assert.match(line.reason, /ECONNREFUSED|No connection established/, line.reason);
    assert.match(line.message, /custom_action steps retry under their retry policy, then fail \(resume them\)/);
    // The next call that gives up within the minute is held back, not a line of its own.
    await assert.rejects(runtime.call(), /The hook-runner is unavailable after 3 attempts/);
    saidOnce(runtime.lines, 'the hook-runner cannot be reached');
  });

  it('says when a gRPC server there is no hook-runner', async () => {
    const stranger = new Server();
    const port = await new Promise<number>((resolve, reject) => stranger.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))));
    toClose.push(() => new Promise((done) => stranger.tryShutdown(() => done())));
    const runtime = await connected(`127.0.0.1:${port}`);
    toClose.push(runtime.close);
    await runtime.checked;
    const line = saidOnce(runtime.lines, 'did not answer its health check at start');
    assert.equal(line.runner, `127.0.0.1:${port}`);
    assert.match(line.reason, /does not implement the method \/sluice\.hookrunner\.v1\.HookRunner\/Health/, line.reason);
  });

  it('says when the runner cannot run guests, and says nothing of one that can', async () => {
    for (const problem of ['the WebAssembly sandbox addon is missing', undefined]) {
      const dataDir = tempDataDir();
      const runner = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token: loadRunnerToken(undefined, dataDir), log: () => undefined, sandboxProblem: () => problem });
      toClose.push(() => runner.close());
      const runtime = await connected(runner.address, dataDir);
      toClose.push(runtime.close);
      await runtime.checked;
      assert.deepEqual(
        runtime.lines.map((line) => (JSON.parse(line) as WarnLine).message),
        problem === undefined ? [] : ['the hook-runner answered that it cannot run guests (its own log says why): custom_action steps wait or fail until it can'],
      );
    }
  });
});
