// `sluice hook-runner` from the CLI: it serves gRPC with its token file and stops cleanly on SIGTERM,
// and on a terminal's Ctrl-C, which reaches both the command and the runner it re-executes once (so
// libuv's thread pool is sized for the machine).

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { connect, createServer, type AddressInfo } from 'node:net';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { oomScoreAdjustment } from '../../hook-runner/oom-preference.ts';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { tempDir } from '../helpers/runtime.ts';

const ROOT = resolve(import.meta.dirname, '../..');

interface RunnerCommand {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  readonly client: HookRunnerClient;
  readonly address: string;
}

/** Starts `sluice hook-runner` in its own process group (as a terminal runs it) and connects a client. */
async function startCommand(dataDir: string): Promise<RunnerCommand> {
  const env = { ...process.env };
  delete env.UV_THREADPOOL_SIZE;
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'hook-runner', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const address = await new Promise<string>((resolveAddress, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const match = /listening on (\S+)$/.exec(line);
      if (match?.[1] !== undefined) resolveAddress(match[1]);
    });
    void exited.then((code) => reject(new Error(`exited early with ${code}`)));
  });
  const token = readFileSync(join(dataDir, 'runner-token'), 'utf8').trim();
  return { child, exited, address, client: new HookRunnerClient(address, token) };
}

/** The pids whose parent is `parent` (from /proc). */
function childrenOf(parent: number): number[] {
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).flatMap((name) => {
    try {
      return Number(readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]) === parent ? [Number(name)] : [];
    } catch {
      return [];
    }
  });
}

/** Leaves nothing of a failed test running. */
function killGroup(started: RunnerCommand | undefined): void {
  try {
    if (started?.child.pid !== undefined) process.kill(-started.child.pid, 'SIGKILL');
  } catch {
    // The group is gone already.
  }
}

/** Starts the command, checks it answers Health with its token, stops it with `stop`, and expects exit 0. */
async function stopsCleanly(stop: (started: RunnerCommand) => void): Promise<void> {
  const dataDir = tempDir('sluice-cli-runner-');
  let started: RunnerCommand | undefined;
  try {
    started = await startCommand(dataDir);
    assert.equal((await started.client.health()).ok, true);
    started.client.close();
    stop(started);
    assert.equal(await started.exited, 0);
  } finally {
    killGroup(started);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

test('sluice hook-runner listens, answers Health with its token, and exits 0 on SIGTERM', () => stopsCleanly((started) => started.child.kill('SIGTERM')));

test('the runner it re-executes does not volunteer for the kernel\'s OOM killer (nothing restarts it), as a runtime\'s child does', async () => {
  const dataDir = tempDir('sluice-cli-runner-');
  let started: RunnerCommand | undefined;
  try {
    started = await startCommand(dataDir);
    started.client.close();
    const runners = childrenOf(started.child.pid!);
    assert.equal(runners.length, 1, 'the command re-executed the runner once');
    assert.equal(oomScoreAdjustment(runners[0]!), oomScoreAdjustment());
    started.child.kill('SIGTERM');
    assert.equal(await started.exited, 0);
  } finally {
    killGroup(started);
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('Ctrl-C (SIGINT to the whole process group) stops it cleanly: exit 0, though the runner hears it twice', () =>
  stopsCleanly((started) => process.kill(-started.child.pid!, 'SIGINT')));

test('a runner whose output nobody reads (2>&1 | head, closed before it starts) keeps serving, and exits 0 on SIGTERM', async () => {
  const dataDir = tempDir('sluice-cli-runner-');
  const free = createServer();
  await new Promise<void>((resolveListen) => free.listen(0, '127.0.0.1', resolveListen));
  const { port } = free.address() as AddressInfo;
  await new Promise((closed) => free.close(closed));
  const env = { ...process.env };
  delete env.UV_THREADPOOL_SIZE;
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'hook-runner', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  // The reader goes away before the runner writes its first line (it starts in about a second).
  child.stdout?.destroy();
  child.stderr?.destroy();
  const started: RunnerCommand = { child, exited, address: `127.0.0.1:${port}`, client: undefined as unknown as HookRunnerClient };
  try {
    const deadline = Date.now() + 30_000;
    let client: HookRunnerClient | undefined;
    for (;;) {
      assert.equal(child.exitCode, null, 'the runner is still running after writing to closed output');
      try {
        client = new HookRunnerClient(started.address, readFileSync(join(dataDir, 'runner-token'), 'utf8').trim());
        if ((await client.health()).ok) break;
      } catch {
        // Not listening yet, or no token file yet.
      }
      client?.close();
      assert.ok(Date.now() < deadline, 'the runner never answered Health');
      await new Promise((wait) => setTimeout(wait, 100));
    }
    client.close();
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  } finally {
    killGroup(started);
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a SIGKILL of the command ends the runner it re-executed: the port is free again', async () => {
  const dataDir = tempDir('sluice-cli-runner-');
  let started: RunnerCommand | undefined;
  try {
    started = await startCommand(dataDir);
    assert.equal((await started.client.health()).ok, true);
    const port = Number(/:(\d+)$/.exec(started.address)?.[1]);
    started.client.close();
    started.child.kill('SIGKILL');
    await started.exited;
    const refused = async (): Promise<boolean> =>
      new Promise((answer) => {
        const socket = connect(port, '127.0.0.1');
        socket.once('connect', () => {
          socket.destroy();
          answer(false);
        });
        socket.once('error', () => answer(true));
      });
    const deadline = Date.now() + 10_000;
    while (!(await refused())) {
      assert.ok(Date.now() < deadline, `port ${port} still held 10 s after the command was killed`);
      await new Promise((wait) => setTimeout(wait, 50));
    }
  } finally {
    killGroup(started);
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a runner it re-executed that is killed by a signal (kill -9, the OOM killer) is said so, and the command exits 128 + its number', async () => {
  const dataDir = tempDir('sluice-cli-runner-');
  let started: RunnerCommand | undefined;
  try {
    started = await startCommand(dataDir);
    const stderr: string[] = [];
    createInterface({ input: started.child.stderr! }).on('line', (line) => void stderr.push(line));
    const pid = started.child.pid!;
    const [runner] = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
    assert.ok(runner !== undefined && runner > 0, 'the re-executed runner');
    started.client.close();
    process.kill(runner, 'SIGKILL');
    assert.equal(await started.exited, 137);
    // Its output is read to the end ('close' comes after 'exit').
    if (started.child.stderr?.readableEnded !== true) await once(started.child.stderr!, 'close');
    assert.ok(stderr.includes('hook-runner: the runner process was killed by SIGKILL'), stderr.join('\n'));
  } finally {
    killGroup(started);
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a listen address in use is one line naming it, exit 2, no stack trace', async () => {
  const dataDir = tempDir('sluice-cli-runner-');
  const busy = createServer();
  await new Promise<void>((resolveListen) => busy.listen(0, '127.0.0.1', resolveListen));
  const { port } = busy.address() as AddressInfo;
  try {
    const result = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'hook-runner', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(result.status, 2, result.stderr);
    assert.match(result.stderr, new RegExp(`^hook-runner: could not listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE.*\\n$`), 'that one line only');
    assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
  } finally {
    busy.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a data dir the runner cannot use (a file where the directory goes) is one line naming it, exit 2, no stack trace', () => {
  const parent = tempDir('sluice-cli-runner-');
  const dataDir = join(parent, 'a-file');
  writeFileSync(dataDir, 'not a directory');
  try {
    const result = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'hook-runner', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(result.status, 2, result.stderr);
    assert.match(result.stderr, /^hook-runner: The data dir .*a-file cannot be used: ENOTDIR: .*Fix its ownership, permissions or path and start again\.\n$/, 'that one line only');
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});

test('a second runner on a data dir one is running on is refused, one line naming the holder, exit 1 (a supervisor may retry once the first is gone); the first keeps serving', async () => {
  const dataDir = tempDir('sluice-cli-runner-');
  let started: RunnerCommand | undefined;
  try {
    started = await startCommand(dataDir);
    const env = { ...process.env };
    delete env.UV_THREADPOOL_SIZE;
    const second = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'hook-runner', '--listen', '127.0.0.1:0', '--data-dir', dataDir], { cwd: ROOT, env, encoding: 'utf8', timeout: 30_000 });
    assert.equal(second.status, 1, second.stderr);
    assert.match(second.stderr, new RegExp(`^hook-runner: .* is in use by process \\d+: run one hook-runner per data directory\\.\\n$`));
    assert.equal((await started.client.health()).ok, true, 'the first still answers');
    started.child.kill('SIGTERM');
    assert.equal(await started.exited, 0);
    // Its lock went with it: a runner starts there again.
    started = await startCommand(dataDir);
    started.child.kill('SIGTERM');
    assert.equal(await started.exited, 0);
  } finally {
    killGroup(started);
    rmSync(dataDir, { recursive: true, force: true });
  }
});
