// The hook-runner compiles untrusted modules in a process of its own (compile-process.ts), killed
// when a compile passes its deadline or memory cap: Cranelift cannot be stopped part way, and modules
// within every admission cap can still compile for a minute or into gigabytes. Real worker processes
// and the real addon; the slow and greedy modules really are (about a minute, several GB unchecked).

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { CompileProcess, defaultCompileMaxMemoryBytes } from '../../hook-runner/compile-process.ts';
import { COMPILE_PROCESS_OOM_SCORE, oomScoreAdjustment } from '../../hook-runner/oom-preference.ts';
import { RunnerUnavailableError } from '../../runtime/hook-runner/runner-errors.ts';
import { runModule } from '../../hook-runner/sandbox-run.ts';
import { SandboxCompileError, SandboxUnavailableError } from '../../hook-runner/sandbox.ts';
import { invocation, startRunner, waitFor } from '../helpers/hook-runner.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';
import { moduleWithFunction, slowToCompileModule, uleb } from '../helpers/wasm-bytes.ts';

/** `count` nested blocks, then `count` locals read: at 30,000, ~220 KB that compiles into several GB; at 5,200, ~210 MB. */
function greedyModule(count = 30_000): Uint8Array {
  const reads = Array.from({ length: count }, (_, index) => [0x20, ...uleb(index), 0x1a]).flat();
  return moduleWithFunction([...Array(count).fill([0x02, 0x40]).flat(), ...Array(count).fill(0x0b), ...reads], count);
}

const isGone = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
};

/** Resolves once process `pid` is gone (a killed child is reaped by its parent's event loop). */
async function gone(pid: number): Promise<boolean> {
  for (let tries = 0; tries < 500 && !isGone(pid); tries += 1) await new Promise((resolve) => setTimeout(resolve, 10));
  return isGone(pid);
}

test('a module compiles in the compile process, which gets none of the runner\'s environment, and runs here; a refusal comes back with its code and reason', async () => {
  // As a runner started with its token in the environment has it.
  process.env['SLUICE_RUNNER_TOKEN'] = 'token-the-compile-process-must-not-see';
  const compiler = new CompileProcess();
  try {
    const echo = await compiler.compile(await assembleWat('echo', ECHO_WAT));
    assert.ok(compiler.pid !== undefined && compiler.pid !== process.pid, 'compiled in a process of its own');
    const environment = readFileSync(`/proc/${compiler.pid}/environ`, 'utf8');
    assert.doesNotMatch(environment, /SLUICE_|token-the-compile/, 'none of the runner\'s settings (its token and master key may be among them)');
    const outcome = await runModule(echo, '{"a":1}');
    assert.deepEqual(outcome.kind === 'output' && JSON.parse(outcome.output), { a: 1 });
    const importing = await assembleWat('importing', '(module (import "env" "f" (func)) (memory (export "memory") 1) (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))');
    await assert.rejects(compiler.compile(importing), (error: unknown) => error instanceof SandboxCompileError && error.code === 'imports_not_allowed' && /env\.f/.test(error.reason));
  } finally {
    compiler.close();
    delete process.env['SLUICE_RUNNER_TOKEN'];
  }
});

test('a compile past its deadline is refused (code_too_large) and its process killed; the next compile gets a fresh one', async () => {
  const compiler = new CompileProcess({ timeoutMs: 1000 });
  try {
    await compiler.compile(await assembleWat('warm', ECHO_WAT));
    const first = compiler.pid!;
    await assert.rejects(compiler.compile(slowToCompileModule()), (error: unknown) => {
      assert.ok(error instanceof SandboxCompileError);
      assert.equal(error.code, 'code_too_large');
      assert.match(error.reason, /took longer than 1 s, the sandbox's limit/);
      return true;
    });
    assert.ok(await gone(first), 'the process that was compiling it is killed');
    const echo = await compiler.compile(await assembleWat('echo', ECHO_WAT));
    assert.notEqual(compiler.pid, first);
    assert.equal((await runModule(echo, '{}')).kind, 'output');
  } finally {
    compiler.close();
  }
});

test('a compile past the memory cap is refused (code_too_large); the next compile gets a fresh process', async () => {
  const compiler = new CompileProcess({ maxMemoryBytes: 400 * 1024 * 1024 });
  try {
    await compiler.compile(await assembleWat('warm', ECHO_WAT));
    const first = compiler.pid!;
    await assert.rejects(compiler.compile(greedyModule()), (error: unknown) => error instanceof SandboxCompileError && error.code === 'code_too_large' && /needed more than 400 MiB of memory/.test(error.reason));
    assert.ok(await gone(first));
    assert.ok(await compiler.compile(await assembleWat('echo', ECHO_WAT)));
  } finally {
    compiler.close();
  }
});

test('the default memory cap of a compile is a quarter of what the container allows, from 256 MiB to 1 GiB', () => {
  const MiB = 1024 ** 2;
  assert.equal(defaultCompileMaxMemoryBytes(undefined), 1024 * MiB, 'no container limit known');
  assert.equal(defaultCompileMaxMemoryBytes(2 ** 64), 1024 * MiB, 'Node 20 reports no limit as 2^64');
  assert.equal(defaultCompileMaxMemoryBytes(400 * MiB), 256 * MiB);
  assert.equal(defaultCompileMaxMemoryBytes(1024 * MiB), 256 * MiB, 'the least container the README names: refused by the cap well before the kernel kills it');
  assert.equal(defaultCompileMaxMemoryBytes(2048 * MiB), 512 * MiB);
  assert.equal(defaultCompileMaxMemoryBytes(16384 * MiB), 1024 * MiB);
});

test('a compile is judged by the memory it adds, not by what earlier compiles left: a process left large is retired', async () => {
  const compiler = new CompileProcess({ maxMemoryBytes: 256 * 1024 * 1024 });
  try {
    for (let round = 0; round < 3; round += 1) assert.ok(await compiler.compile(greedyModule(5200)), `round ${round}: under the cap on its own`);
  } finally {
    compiler.close();
  }
});

test('the compile process dying mid-compile fails that compile as retryable (sandbox unavailable); close() fails the one under way', async () => {
  const compiler = new CompileProcess();
  try {
    await compiler.compile(await assembleWat('warm', ECHO_WAT));
    assert.equal(oomScoreAdjustment(compiler.pid!), COMPILE_PROCESS_OOM_SCORE, 'the first process the kernel kills when memory runs out');
    const killed = compiler.compile(slowToCompileModule());
    process.kill(compiler.pid!, 'SIGKILL');
    // Killed before it read the whole module (the send fails, EPIPE) or while compiling it (its exit): retryable either way.
    await assert.rejects(killed, (error: unknown) => error instanceof SandboxUnavailableError && /exited during the compile \(SIGKILL; killed from outside the runner, most likely by the kernel as memory ran out\)|could not be sent the module: write EPIPE/.test(error.message));
    assert.ok(await compiler.compile(await assembleWat('echo', ECHO_WAT)), 'the next compile starts a fresh process');

    const pid = compiler.pid!;
    const stopped = compiler.compile(slowToCompileModule());
    await waitFor(() => compiler.compiling, 'the compile process to get the module');
    compiler.close();
    await assert.rejects(stopped, (error: unknown) => error instanceof SandboxUnavailableError && /stopping: the compile was not finished/.test(error.message));
    assert.ok(await gone(pid));
    await assert.rejects(compiler.compile(await assembleWat('echo', ECHO_WAT)), SandboxUnavailableError);
  } finally {
    compiler.close();
  }
});

test('through the runner: an upload past SLUICE_COMPILE_TIMEOUT_S is refused (400 code_too_large), and another org compiles and runs right after', async () => {
  const runner = await startRunner({ child: { env: { ...process.env, SLUICE_COMPILE_TIMEOUT_S: '1' } } });
  try {
    await assert.rejects(runner.client.compile(slowToCompileModule(), 'org_slow'), (error: Error & { status?: unknown; code?: unknown }) => {
      assert.equal(error.status, 400);
      assert.equal(error.code, 'code_too_large');
      assert.match(error.message, /took longer than 1 s, the sandbox's limit/);
      return true;
    });
    const echo = await runner.client.compile(await assembleWat('echo', ECHO_WAT), 'org_other');
    const result = await runner.client.invoke(invocation(echo, { orgId: 'org_other', payloadJson: '{"b":2}' }));
    assert.equal(result.outcome.kind, 'output');
  } finally {
    await runner.close();
  }
});

/** A process's user CPU time so far, in clock ticks (from /proc). */
const cpuTicks = (pid: number): number => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[11]);

/** The pids of compile processes whose parent is `parent` (from /proc). */
function compileProcessesOf(parent: number): number[] {
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).flatMap((name) => {
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      const ppid = Number(readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);
      return cmdline.includes('compile-worker.ts') && ppid === parent ? [Number(name)] : [];
    } catch {
      return [];
    }
  });
}

test('through the runner: a compile process killed mid-compile fails that upload as retryable, said in one sentence in the runner log (no stack)', async () => {
  // One attempt: the client sends an unavailable call again, which would compile the module anew.
  const runner = await startRunner({ client: { attempts: 1 } });
  try {
    const upload = runner.client.compile(slowToCompileModule(), 'org_slow').catch((error: unknown) => error);
    let compiling: number[] = [];
    await waitFor(() => (compiling = compileProcessesOf(runner.child.pid!)).length === 1, 'the runner to start its compile process');
    const started = cpuTicks(compiling[0]!);
    // Two seconds of CPU: past its own start (loading tsx took more than the half second once waited
    // for here, under load, and a kill then is a process that "did not start"), well inside the compile.
    await waitFor(() => cpuTicks(compiling[0]!) > started + 200, 'the compile process to be compiling');
    process.kill(compiling[0]!, 'SIGKILL');
    const failed = await upload;
    assert.ok(failed instanceof RunnerUnavailableError && /The hook-runner is unavailable after 1 attempt \(Compile\): The WebAssembly sandbox is unavailable on this runner; see its log\./.test(failed.message), String(failed));
    await waitFor(() => runner.logLines.some((line) => line.includes('the sandbox is unavailable')), 'the runner to log the failed compile');
    const said = runner.logLines.filter((line) => line.includes('Compile'));
    assert.equal(said.length, 1, said.join('\n'));
    assert.match(said[0]!, /hook-runner: error: Compile: the sandbox is unavailable: (the hook-runner's compile process exited during the compile \(SIGKILL; killed from outside the runner, most likely by the kernel as memory ran out\)|the compile process could not be sent the module: write EPIPE)/);
    assert.equal(runner.logLines.some((line) => line.includes('failed unexpectedly')), false, runner.logLines.join('\n'));
  } finally {
    await runner.close();
  }
});

test('a runner killed mid-compile takes its compile process with it, however long that compile would run', async () => {
  const runner = await startRunner({ child: { restartDelayMs: () => 60_000 } });
  try {
    const upload = runner.client.compile(slowToCompileModule(), 'org_slow').catch((error: unknown) => error);
    const runnerPid = runner.child.pid!;
    let compiling: number[] = [];
    await waitFor(() => (compiling = compileProcessesOf(runnerPid)).length === 1, 'the runner to start its compile process');
    // Until it has the module and is compiling (a minute of work for this one): CPU time climbs.
    const started = cpuTicks(compiling[0]!);
    await waitFor(() => cpuTicks(compiling[0]!) > started + 100, 'the compile process to spend a second compiling');
    process.kill(runnerPid, 'SIGKILL');
    assert.ok(await gone(compiling[0]!), 'the compile process ended with its runner, not when its compile would have');
    assert.ok(await upload instanceof Error);
  } finally {
    await runner.close();
  }
});

test('a compile process that cannot be spawned (Node throws ENOMEM, EBUSY, … at once) is the sandbox unavailable for now, and the next compile starts one', async () => {
  const { createRequire, syncBuiltinESMExports } = await import('node:module');
  const childProcess = createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
  const realSpawn = childProcess.spawn;
  // As Node throws it for a failure it does not report through the 'error' event.
  childProcess.spawn = (() => {
    throw Object.assign(new Error('spawn EBUSY'), { code: 'EBUSY', syscall: 'spawn' });
  }) as typeof childProcess.spawn;
  syncBuiltinESMExports();
  const compiler = new CompileProcess();
  try {
    await assert.rejects(compiler.compile(await assembleWat('echo', ECHO_WAT)), (error: unknown) => error instanceof SandboxUnavailableError && /compile process could not be started: spawn EBUSY/.test(error.message));
  } finally {
    childProcess.spawn = realSpawn;
    syncBuiltinESMExports();
  }
  try {
    const echo = await compiler.compile(await assembleWat('echo', ECHO_WAT));
    const outcome = await runModule(echo, '{"a":2}');
    assert.deepEqual(outcome.kind === 'output' && JSON.parse(outcome.output), { a: 2 });
  } finally {
    compiler.close();
  }
});
