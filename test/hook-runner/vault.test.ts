// The vault: AES-256-GCM at rest (no plaintext in the LMDB files), fail-closed reads of tampered,
// moved or foreign-key ciphertext, master-key parsing, and secret values absent from errors and logs.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseMasterKey } from '../../hook-runner/master-key.ts';
import type { ActionId, OrgId } from '../../hook-runner/requests.ts';
import { RunnerConfigError } from '../../hook-runner/runner-error.ts';
import { openRunnerStore, runnerStoreDir, type SecretRecordKey } from '../../hook-runner/store.ts';
import { MAX_SECRETS_PER_ACTION, openSealedSecret, sealSecret, secretAad } from '../../hook-runner/vault.ts';
import { ConflictError, InputError } from '../../runtime/errors.ts';
import { CallNotSentError } from '../../runtime/hook-runner/runner-errors.ts';
import { invocation, newMasterKey, startRunner, tempDataDir, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat, fromHexEcho, HEX_ECHO_WAT } from '../helpers/hook-runner-wat.ts';

const scope = { orgId: 'org_vault', actionId: 'act_vault' };
const PLAINTEXT = 'sk_live_PLAINTEXT_MARKER_8d1f0c';

let runner: RunnerFixture;
let echo: string;
let dataDir: string;
let masterKey: string;

before(async () => {
  dataDir = tempDataDir();
  masterKey = newMasterKey();
  runner = await startRunner({ dataDir, masterKey });
  // Hex-encoding: the secrets it was given come back as given (a plain echo's output has them masked).
  echo = await runner.client.compile(await assembleWat('hex-echo', HEX_ECHO_WAT));
});
after(() => runner.close());

/** Stops the runner, edits its LMDB directly, and starts a new runner on the same data dir. */
async function withStoppedRunner(edit: (secrets: ReturnType<typeof openRunnerStore>['secrets']) => Promise<void>, key = masterKey): Promise<void> {
  await runner.close({ keepData: true });
  const store = openRunnerStore(dataDir);
  try {
    await edit(store.secrets);
  } finally {
    await store.close();
  }
  runner = await startRunner({ dataDir, masterKey: key });
}

/**
 * Refused before the guest runs, and retried as a call never sent: the runner's key or data is the
 * operator's to fix, not the guest's fault (a run failed for good on it).
 */
const failsClosed = (key: string) => (error: unknown): boolean => {
  assert.ok(error instanceof CallNotSentError, `expected CallNotSentError, got ${String(error)}`);
  assert.equal(error.code, 'secret_unreadable');
  assert.match(error.message, new RegExp(`secret could not be decrypted: ${key}`));
  assert.match(error.message, /Nothing was run: start the hook-runner with the master key the secret was sealed under/);
  assert.doesNotMatch(error.message, /PLAINTEXT|sk_live/);
  return true;
};

describe('vault at rest', () => {
  it('never writes the plaintext to the LMDB files', async () => {
    await runner.client.putSecret({ ...scope, key: 'STRIPE_KEY', value: PLAINTEXT });
    const dir = runnerStoreDir(dataDir);
    const files = readdirSync(dir);
    assert.ok(files.includes('runner.mdb'), `store files: ${files.join(', ')}`);
    for (const file of files) {
      const bytes = readFileSync(join(dir, file));
      assert.equal(bytes.includes(Buffer.from(PLAINTEXT, 'utf8')), false, `${file} contains the plaintext`);
      assert.equal(bytes.includes(Buffer.from(PLAINTEXT, 'utf16le')), false, `${file} contains the plaintext (utf16)`);
    }
  });

  it('fails closed on a tampered ciphertext, without the value in the error', async () => {
    await runner.client.putSecret({ ...scope, key: 'TAMPERED', value: PLAINTEXT });
    await withStoppedRunner(async (secrets) => {
      const id: SecretRecordKey = [scope.orgId, scope.actionId, 'TAMPERED'];
      const sealed = Buffer.from(secrets.get(id) ?? Buffer.alloc(0));
      assert.ok(sealed.length > 29);
      sealed[sealed.length - 1] = (sealed[sealed.length - 1] ?? 0) ^ 0x01;
      await secrets.put(id, sealed);
    });
    await assert.rejects(runner.client.invoke(invocation(echo, { ...scope, permissions: ['read_secret:TAMPERED'] })), failsClosed('TAMPERED'));
    // The guest never ran with it, and invocations that do not ask for it still work.
    const other = await runner.client.invoke(invocation(echo, { ...scope, permissions: ['read_secret:STRIPE_KEY'] }));
    assert.equal(other.outcome.kind === 'output' && (fromHexEcho(other.outcome.outputJson).secrets as Record<string, string>).STRIPE_KEY, PLAINTEXT);
  });

  it('fails closed on a ciphertext moved to another key (AAD binds org, action, key)', async () => {
    await runner.client.putSecret({ ...scope, key: 'SOURCE', value: PLAINTEXT });
    await withStoppedRunner(async (secrets) => {
      const sealed = secrets.get([scope.orgId, scope.actionId, 'SOURCE']);
      assert.ok(sealed !== undefined);
      await secrets.put([scope.orgId, scope.actionId, 'MOVED'], sealed);
    });
    await assert.rejects(runner.client.invoke(invocation(echo, { ...scope, permissions: ['read_secret:MOVED'] })), failsClosed('MOVED'));
  });

  it('fails closed under a different master key', async () => {
    await withStoppedRunner(async () => undefined, newMasterKey());
    await assert.rejects(runner.client.invoke(invocation(echo, { ...scope, permissions: ['read_secret:STRIPE_KEY'] })), failsClosed('STRIPE_KEY'));
    await withStoppedRunner(async () => undefined, masterKey);
  });

  it('keeps values out of validation errors and the runner log', async () => {
    const huge = `${PLAINTEXT}${'x'.repeat(64 * 1024)}`;
    await assert.rejects(runner.client.putSecret({ ...scope, key: 'TOO_BIG', value: huge }), (error: unknown) => {
      assert.ok(error instanceof InputError);
      assert.equal(error.field, 'value');
      assert.doesNotMatch(error.message, /PLAINTEXT/);
      return true;
    });
    await assert.rejects(runner.client.putSecret({ ...scope, key: 'lower', value: PLAINTEXT }), (error: unknown) => {
      assert.ok(error instanceof InputError);
      assert.doesNotMatch(error.message, /PLAINTEXT/);
      return true;
    });
    assert.equal(runner.logLines.some((line) => line.includes(PLAINTEXT)), false);
  });
});

describe('sealing', () => {
  const key = parseMasterKey(newMasterKey(), 'test');
  const where = { orgId: 'o' as OrgId, actionId: 'a' as ActionId };

  it('round-trips with a fresh nonce per value', () => {
    const one = sealSecret(key, secretAad(where, 'K'), 'value');
    const two = sealSecret(key, secretAad(where, 'K'), 'value');
    assert.notDeepEqual(one, two);
    assert.equal(openSealedSecret(key, secretAad(where, 'K'), one), 'value');
    assert.equal(openSealedSecret(key, secretAad(where, 'K'), two), 'value');
    assert.equal(openSealedSecret(key, secretAad({ ...where, orgId: 'p' as OrgId }, 'K'), one), undefined);
    assert.equal(openSealedSecret(key, secretAad(where, 'K'), one.subarray(0, 20)), undefined);
  });

  it('accepts 64 hex chars or base64 of 32 bytes as the master key, nothing else', () => {
    const bytes = Buffer.alloc(32, 7);
    for (const text of [bytes.toString('hex'), bytes.toString('hex').toUpperCase(), bytes.toString('base64'), bytes.toString('base64url'), ` ${bytes.toString('hex')}\n`]) {
      assert.equal(parseMasterKey(text, 'SLUICE_MASTER_KEY').symmetricKeySize, 32, text);
    }
    for (const text of ['', 'short', bytes.toString('hex').slice(2), Buffer.alloc(31).toString('base64'), Buffer.alloc(33).toString('base64'), 'g'.repeat(64)]) {
      assert.throws(() => parseMasterKey(text, 'SLUICE_MASTER_KEY'), (error: unknown) => {
        assert.ok(error instanceof RunnerConfigError);
        assert.match(error.message, /SLUICE_MASTER_KEY must be 64 hex characters or the base64 encoding of exactly 32 bytes/);
        if (text.length > 4) assert.equal(error.message.includes(text.trim()), false);
        return true;
      });
    }
  });
});

describe('vault size', () => {
  it(`holds at most ${MAX_SECRETS_PER_ACTION} secrets per action: a new key past it is a conflict, replacing one is not`, async () => {
    const full = { orgId: 'org_vault', actionId: 'act_full' };
    for (let i = 0; i < MAX_SECRETS_PER_ACTION; i++) await runner.client.putSecret({ ...full, key: `KEY_${i}`, value: 'v' });
    await assert.rejects(runner.client.putSecret({ ...full, key: 'ONE_TOO_MANY', value: 'v' }), (error: unknown) => {
      assert.ok(error instanceof ConflictError);
      assert.equal(error.code, 'secret_limit_reached');
      return true;
    });
    await runner.client.putSecret({ ...full, key: 'KEY_0', value: 'replaced' });
    assert.equal((await runner.client.listSecretKeys(full)).length, MAX_SECRETS_PER_ACTION);
    await runner.client.putSecret({ ...scope, key: 'OTHER_ACTION', value: 'v' });
  });
});
