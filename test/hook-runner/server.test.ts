// The programmatic server (createHookRunnerServer) in this process: reports the port it bound,
// serves with the given token and key, refuses weak tokens, and closes idempotently.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, it } from 'node:test';
import { RunnerConfigError } from '../../hook-runner/runner-error.ts';
import { createHookRunnerServer } from '../../hook-runner/server.ts';
import { RetryableError } from '../../runtime/errors.ts';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { newMasterKey, newToken, tempDataDir } from '../helpers/hook-runner.ts';

describe('createHookRunnerServer', () => {
  it('binds port 0, reports the real port, serves, and closes idempotently', async () => {
    const dataDir = tempDataDir();
    const token = newToken();
    const server = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, masterKey: newMasterKey(), log: () => undefined });
    const port = Number(server.address.split(':')[1]);
    assert.ok(port > 0, server.address);
    const client = new HookRunnerClient(server.address, token, { attempts: 2, retryDelayMs: () => 0 });
    try {
      await client.putSecret({ orgId: 'org_s', actionId: 'act', key: 'K', value: 'v' });
      assert.deepEqual(await client.listSecretKeys({ orgId: 'org_s', actionId: 'act' }), ['K']);
      await Promise.all([server.close(), server.close()]);
      await assert.rejects(client.health(), (error: unknown) => error instanceof RetryableError && error.code === 'hook_runner_unavailable');
    } finally {
      client.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses a short token before binding anything', async () => {
    await assert.rejects(createHookRunnerServer({ listen: '127.0.0.1:0', dataDir: tempDataDir(), token: 'short' }), RunnerConfigError);
  });
});
