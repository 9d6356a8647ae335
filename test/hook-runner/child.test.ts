// The runtime's supervisor of the runner process: SIGKILL -> restart with the client's retries riding
// over it (even for an invoke in flight), clean stop, no restart loop on a configuration error, and
// a runner that never outlives a SIGKILLed parent, even one gone before the runner listened.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { RetryableError } from '../../runtime/errors.ts';
import { HookRunnerChild, startTimeoutFor } from '../../runtime/hook-runner/child.ts';
import { oomScoreAdjustment, RUNNER_CHILD_OOM_SCORE } from '../../hook-runner/oom-preference.ts';
import { holdRunnerStore, invocation, newToken, tempDataDir, waitFor, type RunnerFixture, startRunnerWithEcho } from '../helpers/hook-runner.ts';
import { assembleWat, HOSTILE_WAT } from '../helpers/hook-runner-wat.ts';

/** Alive and not a zombie (an orphan's zombie may linger where PID 1 does not reap). */
const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
};

let runner: RunnerFixture;
let echo: string;

before(async () => ({ runner, echo } = await startRunnerWithEcho()));
after(() => runner.close());

describe('hook-runner child supervisor', () => {
  it('starts the runner as the process the kernel kills before the runtime when memory runs out', () => {
    const pid = runner.child.pid ?? assert.fail('no pid');
    assert.equal(oomScoreAdjustment(pid), Math.max(RUNNER_CHILD_OOM_SCORE, oomScoreAdjustment() ?? 0));
  });

  it('restarts a SIGKILLed runner and the client rides over it', async () => {
    const pid = runner.child.pid ?? assert.fail('no pid');
    const restarts = runner.child.restarts;
    process.kill(pid, 'SIGKILL');
    // Issued at once: the first attempt may hit the dead runner; retries wait for the new one.
    const result = await runner.client.invoke(invocation(echo, { payloadJson: '{"after":"kill"}' }));
    assert.equal(result.outcome.kind, 'output');
    assert.equal(runner.child.restarts, restarts + 1);
    assert.notEqual(runner.child.pid, pid);
    assert.equal(isAlive(pid), false);
  });

  it('retries an invoke that was in flight when the runner died', async () => {
    const loop = await runner.client.compile(await assembleWat('loop', HOSTILE_WAT.loop));
    for (let attempt = 1; ; attempt++) {
      const pid = runner.child.pid ?? assert.fail('no pid');
      const restarts = runner.child.restarts;
      let settled = false;
      const run = `run_inflight_${attempt}`;
      const pending = runner.client.invoke(invocation(loop, { idempotencyKey: `${run}:step_1`, fence: 2 })).finally(() => (settled = true));
      // The runner holds the call once it has admitted its fence: a call of the same run with a lower
      // fence is then refused as stale. The guest burns its 50M fuel meanwhile (tens of ms).
      const staleNow = (): Promise<boolean> =>
        runner.client.invoke(invocation(loop, { idempotencyKey: `${run}:step_0`, fence: 1 })).then(
          () => false,
          (error: unknown) => (error as { code?: string }).code === 'stale_fence',
        );
      while (!(await staleNow())) assert.equal(settled, false, 'the call was answered before the runner was seen holding it');
      assert.equal(settled, false, 'still running when the runner is killed');
      process.kill(pid, 'SIGKILL');
      const result = await pending;
      assert.equal(result.outcome.kind === 'trap' && result.outcome.trap, 'out_of_fuel');
      // Answered by a new runner: the call was retried across the restart.
      if (runner.child.restarts > restarts) {
        assert.notEqual(runner.child.pid, pid);
        return;
      }
      // The old runner's answer was already on its way when the kill landed (the guest's tens of ms
      // ran out on a loaded machine): not the case under test. Once the runner is back, again.
      assert.ok(attempt < 5, 'every call was answered before its runner was killed');
      await waitFor(() => runner.child.restarts > restarts && runner.child.state === 'running', 'the restart');
    }
  });

  it('stops the runner and refuses addresses afterwards', async () => {
    const child = new HookRunnerChild({ dataDir: tempDataDir(), token: newToken(), log: () => undefined });
    assert.match(await child.start(), /^127\.0\.0\.1:\d+$/);
    const pid = child.pid ?? assert.fail('no pid');
    await child.stop();
    assert.equal(child.state, 'stopped');
    assert.equal(isAlive(pid), false);
    await assert.rejects(child.address(), RetryableError);
  });

  it("gives the runner only the variables it reads: not the runtime's admin token, an API key or anything else", async () => {
    const env = { ...process.env, SLUICE_ADMIN_TOKEN: 'adm_must_not_reach_the_runner', SLUICE_API_KEY: 'sk_must_not_either', DATABASE_URL: 'postgres://u:p@h/db', SLUICE_COMPILE_TIMEOUT_S: '7' };
    const child = new HookRunnerChild({ dataDir: tempDataDir(), token: newToken(), env, log: () => undefined });
    await child.start();
    try {
      const pid = child.pid ?? assert.fail('no pid');
      const seen = new Map(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]));
      for (const name of ['SLUICE_ADMIN_TOKEN', 'SLUICE_API_KEY', 'DATABASE_URL']) assert.equal(seen.has(name), false, `${name} reached the runner`);
      assert.equal(seen.get('SLUICE_COMPILE_TIMEOUT_S'), '7', 'its own settings pass');
      assert.equal(seen.get('PATH'), process.env['PATH']);
      assert.ok(seen.has('SLUICE_RUNNER_TOKEN') && seen.has('SLUICE_MASTER_KEY') === (process.env['SLUICE_MASTER_KEY'] !== undefined));
    } finally {
      await child.stop();
    }
  });

  it('does not restart a runner that refuses its configuration', async () => {
    const lines: string[] = [];
    const child = new HookRunnerChild({ dataDir: tempDataDir(), token: newToken(), masterKey: 'not-a-key', log: (line) => void lines.push(line) });
    await assert.rejects(child.start(), (error: unknown) => {
      assert.ok(error instanceof RetryableError);
      assert.match(error.message, /refused its configuration: SLUICE_MASTER_KEY must be 64 hex characters/, 'the reason reaches the caller');
      assert.doesNotMatch(error.message, /not-a-key/);
      return true;
    });
    assert.equal(child.state, 'failed');
    assert.equal(child.restarts, 0);
    assert.ok(lines.some((line) => line.includes('SLUICE_MASTER_KEY must be 64 hex characters')), lines.join('\n'));
    assert.ok(lines.some((line) => /exited unexpectedly \(code 2\); its last output: .*SLUICE_MASTER_KEY must be/.test(line)), 'the exit line carries the output');
    assert.ok(lines.some((line) => /will not be restarted: it refused its configuration \(SLUICE_MASTER_KEY must be.*\); fix that, then start Sluice again$/.test(line)), 'at start-up: Sluice stops, so it says to start again (no steps are retried meanwhile)');
    assert.equal(lines.some((line) => line.includes('not-a-key')), false);
    await child.stop();
  });

  it('a runner that refuses its configuration once it has run (on a restart) says to restart Sluice, which goes on meanwhile', async () => {
    const dataDir = tempDataDir();
    const lines: string[] = [];
    // No master key given: the runner makes and then reads its key file, which must stay private.
    const child = new HookRunnerChild({ dataDir, token: newToken(), restartDelayMs: () => 20, log: (line) => void lines.push(line) });
    await child.start();
    chmodSync(join(dataDir, 'hook-runner', 'master.key'), 0o644);
    process.kill(child.pid ?? assert.fail('no pid'), 'SIGKILL');
    await waitFor(() => child.state === 'failed', 'the restarted runner to refuse its configuration');
    assert.ok(lines.some((line) => /will not be restarted: it refused its configuration .*; fix that, then restart Sluice \(custom action steps are retried meanwhile\)$/.test(line)), lines.join('\n'));
    await child.stop();
  });

  it('a start that times out while the child keeps dying says so, with how it last exited', async () => {
    const dataDir = tempDataDir();
    const release = holdRunnerStore(dataDir);
    // Long enough for the child to start and die at least once on a loaded machine (a tsx start
    // took over 3 s there while other work ran).
    const child = new HookRunnerChild({ dataDir, token: newToken(), startTimeoutMs: 10_000, log: () => undefined });
    try {
      await assert.rejects(child.start(), (error: unknown) => error instanceof RetryableError && /did not become ready within 10000 ms \(it exited unexpectedly \d+ time\(s\), last with code 1; see its output in the log\)/.test(error.message));
    } finally {
      await child.stop();
      release();
    }
  });

  it('exits when its parent is SIGKILLed', async () => {
    const dir = tempDataDir();
    mkdirSync(join(dir, 'parent'));
    writeFileSync(join(dir, 'parent', 'package.json'), '{"type":"module"}');
    const script = join(dir, 'parent', 'parent.ts');
    const childModule = pathToFileURL(join(import.meta.dirname, '../../runtime/hook-runner/child.ts')).href;
    writeFileSync(script, `import { HookRunnerChild } from ${JSON.stringify(childModule)};
const child = new HookRunnerChild({ dataDir: ${JSON.stringify(dir)}, token: ${JSON.stringify(newToken())}, log: () => undefined });
await child.start();
console.log('runner pid ' + child.pid);
setInterval(() => undefined, 1000);
`);
    const parent = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const runnerPid = await new Promise<number>((resolve, reject) => {
      createInterface({ input: parent.stdout }).on('line', (line) => {
        const match = /^runner pid (\d+)$/.exec(line);
        if (match?.[1] !== undefined) resolve(Number(match[1]));
      });
      parent.once('exit', (code) => reject(new Error(`parent exited early (${code})`)));
    });
    assert.equal(isAlive(runnerPid), true);
    parent.kill('SIGKILL');
    await waitFor(() => !isAlive(runnerPid), 'the orphaned runner to exit');
  });

  it('exits when its parent was gone before it listened (the channel closed while it opened its store)', async () => {
    const dir = tempDataDir();
    const entry = join(import.meta.dirname, '../../hook-runner/main.ts');
    const orphan = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), entry, '--listen', '127.0.0.1:0', '--data-dir', dir], {
      env: { ...process.env, SLUICE_RUNNER_TOKEN: newToken() },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const output: string[] = [];
    orphan.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    orphan.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const exited = new Promise<number | null>((resolve) => orphan.once('exit', (code) => resolve(code)));
    // As a parent SIGKILLed right after the spawn: the channel closes before the runner listens.
    orphan.disconnect();
    try {
      await waitFor(() => orphan.exitCode !== null, 'the runner to stop', 20_000);
      assert.equal(await exited, 0, output.join(''));
      assert.match(output.join(''), /hook-runner: stopping \(parent disconnected\)/);
    } finally {
      orphan.kill('SIGKILL');
    }
  });
});

describe('the start timeout', () => {
  it('is 30 s, and 15 min while earlier master keys are given (the runner seals secrets again before it listens)', () => {
    assert.equal(startTimeoutFor({}), 30_000);
    assert.equal(startTimeoutFor({ SLUICE_PREVIOUS_MASTER_KEYS: '  ' }), 30_000, 'blank: not set (the runner refuses it anyway)');
    assert.equal(startTimeoutFor({ SLUICE_PREVIOUS_MASTER_KEYS: 'a'.repeat(64) }), 15 * 60_000);
  });
});
