// The programmatic server (createHookRunnerServer) in this process: reports the port it bound,
// serves with the given token and key, refuses weak tokens, and closes idempotently. Without a key
// given it makes its key file while the vault is empty, and refuses to replace a lost one that
// secrets were sealed under (unless earlier keys are given: a rotation).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { RunnerConfigError } from '../../hook-runner/runner-error.ts';
import { masterKeyPath, parseMasterKey } from '../../hook-runner/master-key.ts';
import { createHookRunnerServer } from '../../hook-runner/server.ts';
import { runnerStoreDir } from '../../hook-runner/store.ts';
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

  it('says at start when guests cannot run here (the addon missing or stale), once, and Health answers ok false; a working sandbox says nothing', async () => {
    for (const problem of ['the WebAssembly sandbox addon is missing (/x/sluice-sandbox.node); run `npm install`', undefined]) {
      const dataDir = tempDataDir();
      const token = newToken();
      const lines: string[] = [];
      const server = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, masterKey: newMasterKey(), log: (line) => void lines.push(line), sandboxProblem: () => problem });
      const client = new HookRunnerClient(server.address, token, { attempts: 1 });
      try {
        const warnings = lines.filter((line) => line.includes('custom actions cannot compile or run here'));
        assert.deepEqual(warnings, problem === undefined ? [] : [`hook-runner: warning: custom actions cannot compile or run here: ${problem}`]);
        assert.equal((await client.health()).ok, problem === undefined);
      } finally {
        client.close();
        await server.close();
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
  });

  it('refuses a short token before binding anything', async () => {
    await assert.rejects(createHookRunnerServer({ listen: '127.0.0.1:0', dataDir: tempDataDir(), token: 'short' }), RunnerConfigError);
  });

  it('refuses a token no gRPC client can send (not visible ASCII) before binding anything', async () => {
    for (const token of ['é'.repeat(17), `${'a'.repeat(16)}\u0001`, `${'a'.repeat(8)} ${'a'.repeat(8)}`]) {
      await assert.rejects(createHookRunnerServer({ listen: '127.0.0.1:0', dataDir: tempDataDir(), token }), /the runner token must be at least 16 visible ASCII characters \(no spaces\)/);
    }
  });

  it('makes its key file while the vault is empty, and will not replace a lost one that secrets were sealed under', async () => {
    const dataDir = tempDataDir();
    const token = newToken();
    const keyFile = masterKeyPath(runnerStoreDir(dataDir));
    try {
      const first = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, log: () => undefined });
      assert.ok(existsSync(keyFile), 'made on first start');
      const lostKey = readFileSync(keyFile, 'utf8').trim();
      const client = new HookRunnerClient(first.address, token, { attempts: 2, retryDelayMs: () => 0 });
      await client.putSecret({ orgId: 'org_k', actionId: 'act', key: 'API_TOKEN', value: 'sk_live_sealed' });
      client.close();
      await first.close();

      rmSync(keyFile);
      const refused = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, log: () => undefined }).then(
        async (started) => void (await started.close()),
        (error: unknown) => error,
      );
      assert.ok(refused instanceof RunnerConfigError, String(refused));
      assert.match(refused.message, /master\.key is missing, but the vault holds 1 secret\(s\) sealed under a master key: restore the file or set SLUICE_MASTER_KEY/);
      assert.equal(existsSync(keyFile), false, 'no new key was written');

      // An earlier key given that opens none of them makes no new key file either.
      const unrelated = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, previousMasterKeys: [parseMasterKey(newMasterKey(), 'old')], log: () => undefined }).then(
        async (started) => void (await started.close()),
        (error: unknown) => error,
      );
      assert.ok(unrelated instanceof RunnerConfigError, String(unrelated));
      assert.match(unrelated.message, /master\.key is missing, but the vault holds 1 secret\(s\) sealed under a master key, and none opens under SLUICE_PREVIOUS_MASTER_KEYS: restore the file/);
      assert.equal(existsSync(keyFile), false, 'no new key was written');

      // With the lost key given as an earlier one, a new key file is a rotation.
      const lines: string[] = [];
      const rotated = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, previousMasterKeys: [parseMasterKey(lostKey, 'old')], log: (line) => void lines.push(line) });
      await rotated.close();
      assert.ok(existsSync(keyFile));
      assert.match(lines.join('\n'), /master key rotation: 1 secret\(s\) sealed again/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses a given key (SLUICE_MASTER_KEY) that opens none of the secrets the key file opens; the file\'s key, or a rotation from it, starts', async () => {
    const dataDir = tempDataDir();
    const token = newToken();
    const keyFile = masterKeyPath(runnerStoreDir(dataDir));
    const startWith = (options: { masterKey?: string; previous?: string }) =>
      createHookRunnerServer({
        listen: '127.0.0.1:0',
        dataDir,
        token,
        log: () => undefined,
        ...(options.masterKey === undefined ? {} : { masterKey: options.masterKey }),
        ...(options.previous === undefined ? {} : { previousMasterKeys: [parseMasterKey(options.previous, 'old')] }),
      });
    const readSecret = async (address: string): Promise<string[]> => {
      const client = new HookRunnerClient(address, token, { attempts: 2, retryDelayMs: () => 0 });
      try {
        return await client.listSecretKeys({ orgId: 'org_f', actionId: 'act' });
      } finally {
        client.close();
      }
    };
    try {
      const first = await startWith({});
      const client = new HookRunnerClient(first.address, token, { attempts: 2, retryDelayMs: () => 0 });
      await client.putSecret({ orgId: 'org_f', actionId: 'act', key: 'API_TOKEN', value: 'sk_live_file' });
      client.close();
      await first.close();
      const fileKey = readFileSync(keyFile, 'utf8').trim();
      const stranger = newMasterKey();

      const refused = await startWith({ masterKey: stranger }).then(async (started) => void (await started.close()), (error: unknown) => error);
      assert.ok(refused instanceof RunnerConfigError, String(refused));
      assert.match(refused.message, /SLUICE_MASTER_KEY opens none of the vault's secrets, but the key file .*master\.key opens them/);
      assert.ok(!refused.message.includes(fileKey) && !refused.message.includes(stranger), 'no key in the message');

      const same = await startWith({ masterKey: fileKey });
      assert.deepEqual(await readSecret(same.address), ['API_TOKEN']);
      await same.close();

      // A rotation from the file's key to the given one moves the key file, which holds the old key,
      // out of the way: a start without SLUICE_MASTER_KEY is then refused instead of sealing new
      // secrets under the old key.
      const lines: string[] = [];
      const rotated = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, masterKey: stranger, previousMasterKeys: [parseMasterKey(fileKey, 'old')], log: (line) => void lines.push(line) });
      await rotated.close();
      assert.equal(existsSync(keyFile), false);
      assert.equal(readFileSync(`${keyFile}.old`, 'utf8').trim(), fileKey);
      assert.match(lines.join('\n'), /master\.key held the previous key; moved to .*master\.key\.old/);
      const withoutKey = await startWith({}).then(async (started) => void (await started.close()), (error: unknown) => error);
      assert.match(String(withoutKey), /master\.key is missing, but the vault holds 1 secret\(s\) sealed under a master key/);
      const after = await startWith({ masterKey: stranger });
      assert.deepEqual(await readSecret(after.address), ['API_TOKEN']);
      await after.close();

      // With master.key.old already there (an earlier rotation's), the file is left in place, with a warning.
      writeFileSync(keyFile, `${fileKey}\n`, { mode: 0o600 });
      const newer = newMasterKey();
      const warned: string[] = [];
      const again = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, masterKey: newer, previousMasterKeys: [parseMasterKey(stranger, 'old')], log: (line) => void warned.push(line) });
      await again.close();
      assert.equal(existsSync(keyFile), true, 'the file does not hold a previous key given: not touched');
      const third: string[] = [];
      const fromFileKey = await createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token, masterKey: stranger, previousMasterKeys: [parseMasterKey(newer, 'old'), parseMasterKey(fileKey, 'older')], log: (line) => void third.push(line) });
      await fromFileKey.close();
      assert.equal(existsSync(keyFile), true);
      assert.match(third.join('\n'), /still holds a previous master key and .*master\.key\.old exists, so it was not moved/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
