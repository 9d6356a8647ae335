// `sluice hook-runner` from the CLI: it serves gRPC with its token file and stops cleanly on SIGTERM
// (it re-executes itself once so libuv's thread pool is sized for the machine).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { tempDir } from '../helpers/runtime.ts';

const ROOT = resolve(import.meta.dirname, '../..');

test('sluice hook-runner listens, answers Health with its token, and exits 0 on SIGTERM', async () => {
  const dataDir = tempDir('sluice-cli-runner-');
  const env = { ...process.env };
  delete env.UV_THREADPOOL_SIZE;
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'hook-runner', '--listen', '127.0.0.1:0', '--data-dir', dataDir], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  try {
    const address = await new Promise<string>((resolveAddress, reject) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        const match = /listening on (\S+)$/.exec(line);
        if (match?.[1] !== undefined) resolveAddress(match[1]);
      });
      void exited.then((code) => reject(new Error(`exited early with ${code}`)));
    });
    const token = readFileSync(join(dataDir, 'runner-token'), 'utf8').trim();
    const client = new HookRunnerClient(address, token);
    const health = await client.health();
    assert.equal(health.ok, true);
    client.close();
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  } finally {
    child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
});
