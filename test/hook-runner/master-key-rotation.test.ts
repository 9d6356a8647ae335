// Rotating the vault's master key with real runner processes on one data dir: a runner started with
// a new SLUICE_MASTER_KEY and the old one in SLUICE_PREVIOUS_MASTER_KEYS seals every secret again
// under the new key before serving, so a later runner needs only the new key; secrets no given key
// opens are counted (never shown) and keep failing closed.

import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { parseMasterKey, parsePreviousMasterKeys } from '../../hook-runner/master-key.ts';
import { recordAad, sealSecret } from '../../hook-runner/vault.ts';
import { openRunnerStore } from '../../hook-runner/store.ts';
import { RunnerConfigError } from '../../hook-runner/runner-error.ts';
import { CallNotSentError } from '../../runtime/hook-runner/runner-errors.ts';
import { invocation, newMasterKey, startRunner, tempDataDir, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat, fromHexEcho, HEX_ECHO_WAT } from '../helpers/hook-runner-wat.ts';

const scope = { orgId: 'org_rotate', actionId: 'act_rotate' };

/** Runners still up: a failing assertion must not leave a child process holding the test open. */
const running = new Set<RunnerFixture>();
afterEach(async () => {
  for (const runner of running) await runner.close();
  running.clear();
});

/** A runner on `dataDir` under `masterKey`, with `previous` keys passed as the operator would. */
async function runnerWith(dataDir: string, masterKey: string, previous?: string): Promise<RunnerFixture> {
  const runner = await startRunner({ dataDir, masterKey, child: { env: { ...process.env, SLUICE_PREVIOUS_MASTER_KEYS: previous } } });
  running.add(runner);
  return runner;
}

/** Stops a runner and keeps its data dir for the next one. */
async function stop(runner: RunnerFixture): Promise<void> {
  running.delete(runner);
  await runner.close({ keepData: true });
}

/** The secrets the echo guest was given, as it echoes its envelope back hex-encoded (a plain echo's output has them masked). */
async function secretsSeen(runner: RunnerFixture, digest: string, keys: readonly string[]): Promise<Record<string, string>> {
  const result = await runner.client.invoke(invocation(digest, { ...scope, permissions: keys.map((key) => `read_secret:${key}`) }));
  assert.equal(result.outcome.kind, 'output');
  return (fromHexEcho(result.outcome.kind === 'output' ? result.outcome.outputJson : '{"hex":"7b7d"}') as { secrets: Record<string, string> }).secrets;
}

test('a runner started with the old key as previous seals every secret again under the new key', async () => {
  const dataDir = tempDataDir();
  const oldKey = newMasterKey();
  const newKey = newMasterKey();

  const before = await runnerWith(dataDir, oldKey);
  const echo = await before.client.compile(await assembleWat('hex-echo', HEX_ECHO_WAT));
  await before.client.putSecret({ ...scope, key: 'STRIPE_KEY', value: 'sk_live_rotate_1' });
  await before.client.putSecret({ ...scope, key: 'SLACK_TOKEN', value: 'xoxb-rotate-2' });
  await stop(before);

  const rotating = await runnerWith(dataDir, newKey, ` ${oldKey} `);
  assert.deepEqual(await secretsSeen(rotating, echo, ['STRIPE_KEY', 'SLACK_TOKEN']), { STRIPE_KEY: 'sk_live_rotate_1', SLACK_TOKEN: 'xoxb-rotate-2' });
  const logged = rotating.logLines.join('\n');
  assert.match(logged, /master key rotation: 2 secret\(s\) sealed again under the current key/);
  assert.doesNotMatch(logged, /sk_live_rotate_1|xoxb-rotate-2|open under none/);
  await stop(rotating);

  const after = await runnerWith(dataDir, newKey);
  assert.deepEqual(await secretsSeen(after, echo, ['STRIPE_KEY', 'SLACK_TOKEN']), { STRIPE_KEY: 'sk_live_rotate_1', SLACK_TOKEN: 'xoxb-rotate-2' }, 'the old key is no longer needed');
  await stop(after);

  const oldOnly = await runnerWith(dataDir, oldKey);
  await assert.rejects(secretsSeen(oldOnly, echo, ['STRIPE_KEY']), (error: unknown) => error instanceof CallNotSentError && error.code === 'secret_unreadable', 'the old key no longer opens them');
});

test('secrets that no given key opens are counted, left alone and still fail closed', async () => {
  const dataDir = tempDataDir();
  const lostKey = newMasterKey();
  const newKey = newMasterKey();

  const before = await runnerWith(dataDir, lostKey);
  const echo = await before.client.compile(await assembleWat('hex-echo', HEX_ECHO_WAT));
  await before.client.putSecret({ ...scope, key: 'ORPHAN', value: 'sk_live_orphan' });
  await stop(before);

  // Earlier keys that open none of them: the line no longer says they are not needed (the operator deleted the right key on that word).
  const starting = await runnerWith(dataDir, newKey, `${newMasterKey()},${newMasterKey()}`);
  const said = starting.logLines.join('\n');
  assert.match(said, /master key rotation: 0 secret\(s\) sealed again under the current key; 1 secret\(s\) open under none of the given keys \(is SLUICE_PREVIOUS_MASTER_KEYS the key they were sealed with\?\): keep every earlier key you have until they do\./);
  assert.match(said, /warning: 1 secret\(s\) open under none of the given master keys/);
  assert.doesNotMatch(said, /no longer needed/);
  await assert.rejects(secretsSeen(starting, echo, ['ORPHAN']), (error: unknown) => error instanceof CallNotSentError && error.code === 'secret_unreadable');
  await starting.client.putSecret({ ...scope, key: 'FRESH', value: 'sk_live_fresh' });
  await stop(starting);

  // An earlier key that opens some: those are sealed again, and the line says to keep the earlier keys.
  const newest = newMasterKey();
  const partly = await runnerWith(dataDir, newest, newKey);
  const logged = partly.logLines.join('\n');
  assert.match(logged, /master key rotation: 1 secret\(s\) sealed again under the current key; 1 secret\(s\) open under none of the given keys \(is SLUICE/);
  assert.doesNotMatch(logged, /no longer needed/);
  assert.deepEqual(await secretsSeen(partly, echo, ['FRESH']), { FRESH: 'sk_live_fresh' });
  await stop(partly);

  const recovered = await runnerWith(dataDir, newest, lostKey);
  assert.deepEqual(await secretsSeen(recovered, echo, ['ORPHAN', 'FRESH']), { ORPHAN: 'sk_live_orphan', FRESH: 'sk_live_fresh' }, 'left alone, so the right key still recovers it');
  assert.match(recovered.logLines.join('\n'), /1 secret\(s\) sealed again under the current key; the previous keys are no longer needed/);
});

test('a runner started with a key that opens none of its secrets says so at start', async () => {
  const dataDir = tempDataDir();
  const before = await runnerWith(dataDir, newMasterKey());
  await before.client.putSecret({ ...scope, key: 'STRIPE_KEY', value: 'sk_live_wrong_key' });
  await stop(before);

  const wrong = await runnerWith(dataDir, newMasterKey());
  const logged = wrong.logLines.join('\n');
  assert.match(logged, /warning: 1 secret\(s\) do not open under the current master key \(set SLUICE_PREVIOUS_MASTER_KEYS/);
  assert.doesNotMatch(logged, /master key rotation|sk_live_wrong_key/);
});

test('SLUICE_PREVIOUS_MASTER_KEYS: unset means none; blank or a bad entry is refused, never echoed', () => {
  assert.deepEqual(parsePreviousMasterKeys(undefined), []);
  assert.throws(() => parsePreviousMasterKeys('  '), (error: unknown) => error instanceof RunnerConfigError && /is set but empty/.test(error.message));
  assert.equal(parsePreviousMasterKeys(`${newMasterKey()}, ${Buffer.alloc(32, 7).toString('base64')}`).length, 2);
  assert.throws(() => parsePreviousMasterKeys(`${newMasterKey()},not-a-key-SECRETISH`), (error: unknown) => {
    assert.ok(error instanceof RunnerConfigError);
    assert.match(error.message, /SLUICE_PREVIOUS_MASTER_KEYS entry 2 must be 64 hex characters/);
    assert.doesNotMatch(error.message, /SECRETISH/);
    return true;
  });
});

test('a call completed before a rotation is answered from its record after it: sealing again under a new key is not a new secret value', async () => {
  const dataDir = tempDataDir();
  const oldKey = newMasterKey();
  const newKey = newMasterKey();
  const before = await runnerWith(dataDir, oldKey);
  const echo = await before.client.compile(await assembleWat('hex-echo', HEX_ECHO_WAT));
  await before.client.putSecret({ ...scope, key: 'STRIPE_KEY', value: 'sk_live_kept' });
  await before.client.putSecret({ ...scope, key: 'LEGACY_KEY', value: 'sk_live_legacy' });
  await stop(before);
  // A secret written by an earlier release has no revision mark: its runs' records know it by its sealed bytes.
  const store = openRunnerStore(dataDir);
  await store.durable(store.secretRevisions.remove([scope.orgId, scope.actionId, 'LEGACY_KEY']));
  await store.close();

  const first = await runnerWith(dataDir, oldKey);
  const call = (fence: number) => invocation(echo, { ...scope, permissions: ['read_secret:STRIPE_KEY', 'read_secret:LEGACY_KEY'], idempotencyKey: 'run_rotation:step_1', fence });
  assert.equal((await first.client.invoke(call(1))).replayed, false);
  await stop(first);

  const rotated = await runnerWith(dataDir, newKey, oldKey);
  assert.match(rotated.logLines.join('\n'), /2 secret\(s\) sealed again/);
  assert.equal((await rotated.client.invoke(call(2))).replayed, true, 'the guest is not run again');
  await rotated.client.putSecret({ ...scope, key: 'STRIPE_KEY', value: 'sk_live_new' });
  assert.equal((await rotated.client.invoke(call(3))).replayed, false, 'a secret written again is a new value: the guest runs again');
});

test('a secret written by an earlier release after this one recorded a call (a rollback) makes that call run again: its mark no longer belongs', async () => {
  const dataDir = tempDataDir();
  const masterKey = newMasterKey();
  const first = await runnerWith(dataDir, masterKey);
  const echo = await first.client.compile(await assembleWat('hex-echo', HEX_ECHO_WAT));
  await first.client.putSecret({ ...scope, key: 'STRIPE_KEY', value: 'sk_live_before' });
  const call = (fence: number) => invocation(echo, { ...scope, permissions: ['read_secret:STRIPE_KEY'], idempotencyKey: 'run_rollback:step_1', fence });
  assert.equal((await first.client.invoke(call(1))).replayed, false);
  await stop(first);
  // An earlier release's runner writes the sealed value alone, leaving the mark as it was.
  const store = openRunnerStore(dataDir);
  const id = [scope.orgId, scope.actionId, 'STRIPE_KEY'] as const;
  await store.durable(store.secrets.put([...id], sealSecret(parseMasterKey(masterKey, 'the test key'), recordAad([...id]), 'sk_live_after')));
  await store.close();

  const again = await runnerWith(dataDir, masterKey);
  assert.equal((await again.client.invoke(call(2))).replayed, false, 'a secret written since the record: the guest runs again');
});
