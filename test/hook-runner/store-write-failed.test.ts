// The hook-runner on a full disk (its store held to 4 MiB by a file-size limit, SIGXFSZ ignored, so
// a write past it fails with EFBIG as one on a full disk fails with ENOSPC): a call whose commit
// fails is answered as the runtime answers its own, `write_failed` and retry after 5 s (it was a
// generic hook_runner_internal), the cause is logged once rather than once per call, and the runner
// goes on answering.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { LISTENING_PREFIX } from '../../hook-runner/wire.ts';
import { RetryableError } from '../../runtime/errors.ts';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { newMasterKey, newToken } from '../helpers/hook-runner.ts';
import { eventually } from '../helpers/receiver.ts';
import { ROOT, tempDir } from '../helpers/runtime.ts';
import { underFileSizeLimit } from '../helpers/file-size-limit.ts';

test('a commit that fails in the runner\'s store is 503 write_failed with a 5 s retry, logged once, and the runner goes on', { timeout: 120_000 }, async () => {
  const dataDir = tempDir('sluice-runner-full-');
  const token = newToken();
  const runner = [process.execPath, '--import', 'tsx', 'runtime/cli.ts', 'hook-runner', '--listen', '127.0.0.1:0', '--data-dir', dataDir, '--min-free-disk-mib', '0'];
  const child = spawn('bash', underFileSizeLimit(4096, runner), { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SLUICE_RUNNER_TOKEN: token, SLUICE_MASTER_KEY: newMasterKey() } });
  const exited = new Promise<number | string>((done) => child.once('exit', (code, signal) => done(code ?? signal ?? 'unknown')));
  const logged: string[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => logged.push(line));
  let client: HookRunnerClient | undefined;
  try {
    const address = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        if (line.startsWith(LISTENING_PREFIX)) resolve(line.slice(LISTENING_PREFIX.length).trim());
      });
      void exited.then((code) => reject(new Error(`exited (${code}) before listening: ${logged.join('\n')}`)));
    });
    client = new HookRunnerClient(address, token, { sleep: async () => undefined });
    const value = 'v'.repeat(60 * 1024);
    let stored = 0;
    let refused: unknown;
    for (let action = 0; action < 100 && refused === undefined; action += 1) {
      for (let key = 0; key < 100 && refused === undefined; key += 1) {
        try {
          await client.putSecret({ orgId: 'org_full', actionId: `act_${action}`, key: `K${key}`, value });
          stored += 1;
        } catch (error) {
          refused = error;
        }
      }
    }
    assert.ok(stored > 10, `the store filled after ${stored} secrets`);
    assert.ok(refused instanceof RetryableError, String(refused));
    assert.deepEqual([refused.code, refused.status, refused.retryAfterMs], ['write_failed', 503, 5000], refused.message);
    // Another write meets the same disk: the same answer, and still one line for the operator.
    await assert.rejects(client.putSecret({ orgId: 'org_full', actionId: 'act_more', key: 'K', value }), (error: unknown) => error instanceof RetryableError && error.code === 'write_failed');
    assert.equal((await client.health()).ok, true, 'the runner goes on answering');
    const causes = await eventually('the cause logged', () => logged.filter((line) => line.includes('a store commit failed')), (lines) => lines.length > 0);
    assert.equal(causes.length, 1, logged.join('\n'));
    assert.match(causes[0] ?? '', /Input\/output error|File too large|No space left/, 'names the cause');
    assert.ok(!logged.some((line) => line.includes('failed unexpectedly')), logged.join('\n'));
  } finally {
    client?.close();
    child.kill('SIGKILL');
    await exited;
  }
});
