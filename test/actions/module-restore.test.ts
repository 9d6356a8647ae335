// Restoring a module the hook-runner lost, with the real runner (on a fresh data dir, so it has no
// module at all) and the real custom action store: one transfer for many calls at once, and failing
// closed when no bytes or the wrong bytes are kept.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';
import { CustomActionStore } from '../../runtime/actions/custom-action-store.ts';
import { createRestoringInvoker, type RestoringRunner } from '../../runtime/actions/module-restore.ts';
import { createSecretRequiringInvoker } from '../../runtime/actions/required-secrets.ts';
import { SecretNames } from '../../runtime/actions/secret-names.ts';
import { CallNotSentError } from '../../runtime/hook-runner/runner-errors.ts';
import { SluiceError } from '../../runtime/errors.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { LMDB_LEDGER } from '../helpers/ledgers.ts';
import { assembleWat, ECHO_WAT, HOSTILE_WAT, REJECT_WAT } from '../helpers/hook-runner-wat.ts';
import { invocation, parseOutput, startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';
import { openRunnerStore } from '../../hook-runner/store.ts';

const ORG = 'acct-restore';
const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

let runner: RunnerFixture;
let ledger: Ledger;
let closeLedger: () => Promise<void>;
let store: CustomActionStore;
let compiles = 0;
/** The real client, counting the Compile calls that carry a module's bytes. */
let counted: RestoringRunner;

before(async () => {
  runner = await startRunner();
  const opened = LMDB_LEDGER.open();
  ledger = opened.ledger;
  closeLedger = opened.close;
  store = new CustomActionStore(ledger);
  counted = {
    invoke: (input) => runner.client.invoke(input),
    compile: (wasm) => {
      compiles += 1;
      return runner.client.compile(wasm);
    },
  };
});
after(async () => {
  await runner.close();
  await closeLedger();
});

async function kept(name: string, bytes: Uint8Array, digest = sha256(bytes)): Promise<{ actionId: string; digest: string }> {
  const action = await store.create(ORG, { name, description: '', module: { digest, size: bytes.length, bytes }, permissions: [] }, Date.now());
  return { actionId: action.id, digest };
}

async function failure(promise: Promise<unknown>): Promise<SluiceError> {
  const error = await promise.then(() => assert.fail('expected a rejection'), (caught: unknown) => caught);
  assert.ok(error instanceof SluiceError, String(error));
  return error;
}

test('many calls that find the module missing at once send its bytes once, and each runs', async () => {
  const echo = await assembleWat('echo', ECHO_WAT);
  const { actionId, digest } = await kept('echo', echo);
  const invoker = createRestoringInvoker(counted, store);
  compiles = 0;
  const results = await Promise.all(Array.from({ length: 8 }, (_, n) => invoker.invoke(invocation(digest, { orgId: ORG, actionId, payloadJson: `{"n":${n}}` }))));
  assert.equal(compiles, 1);
  assert.deepEqual(results.map((result) => result.outcome.kind === 'output' && parseOutput(result.outcome.outputJson)['payload']), Array.from({ length: 8 }, (_, n) => ({ n })));
  assert.ok(results.every((result) => !result.replayed));

  await invoker.invoke(invocation(digest, { orgId: ORG, actionId }));
  assert.equal(compiles, 1, 'a module the runner has is not sent');
});

test('a module with no bytes kept (a version from before they were) fails module_not_found, saying to upload again; nothing is sent', async () => {
  const reject = await assembleWat('reject', REJECT_WAT);
  const invoker = createRestoringInvoker(counted, store);
  compiles = 0;
  const error = await failure(invoker.invoke(invocation(sha256(reject), { orgId: ORG })));
  assert.equal(error.code, 'module_not_found');
  assert.match(error.message, /uploaded before Sluice kept module bytes.*Upload the action's module again/);
  assert.equal(compiles, 0);
});

test('kept bytes that do not hash to the digest fail closed: nothing is sent or run', async () => {
  const trap = await assembleWat('trap', HOSTILE_WAT.unreachable);
  const other = await assembleWat('reject', REJECT_WAT);
  const { actionId, digest } = await kept('mislabelled', other, sha256(trap));
  const invoker = createRestoringInvoker(counted, store);
  compiles = 0;
  const error = await failure(invoker.invoke(invocation(digest, { orgId: ORG, actionId })));
  assert.equal(error.code, 'stored_module_corrupt');
  assert.equal(compiles, 0);
  assert.equal((await failure(runner.client.invoke(invocation(digest, { orgId: ORG, actionId })))).code, 'module_not_found', 'the runner still lacks it');
  // Uploading the file again, as the error says, repairs the kept copy.
  await store.addVersion(ORG, actionId, { module: { digest, size: trap.length, bytes: trap } }, Date.now());
  const ran = await invoker.invoke(invocation(digest, { orgId: ORG, actionId }));
  assert.equal(ran.outcome.kind, 'trap', 'the right module ran (it traps by design)');
  assert.equal(compiles, 1);
});

test('kept bytes the runner refuses when they are sent again fail module_recompile_failed, naming its reason, as a module it can no longer compile does', async () => {
  // A rule the runner holds now (here: no `run` export) refuses what an earlier one accepted.
  const refused = await assembleWat('no-run', '(module (memory (export "memory") 1))');
  const { actionId, digest } = await kept('refused-now', refused);
  const invoker = createRestoringInvoker(counted, store);
  compiles = 0;
  const error = await failure(invoker.invoke(invocation(digest, { orgId: ORG, actionId })));
  assert.equal(compiles, 1);
  assert.equal(error.code, 'module_recompile_failed');
  assert.match(error.message, /refused it when it was sent again \(missing_export: .*\); upload a rebuilt module as a new version/);
});

test('a call reading secrets this runtime set, which the runner no longer holds, is not sent: it fails retryably, naming them, also when the module is back; it runs once they are set', async () => {
  const echo = await assembleWat('echo', ECHO_WAT);
  // A distinct module (the echo one above is on the runner by now): the same code plus a custom
  // section (id 0, 2 bytes: a 1-byte name "x"), which makes other bytes and another digest.
  const bytes = new Uint8Array([...echo, 0x00, 0x02, 0x01, 0x78]);
  const digest = sha256(bytes);
  const permissions = ['read_secret:API_TOKEN', 'read_secret:NEVER_SET'];
  const first = await store.create(ORG, { name: 'with-secret', description: '', module: { digest, size: bytes.length, bytes }, permissions }, Date.now());
  // Another action with the same file: once one call restores the module, its calls find it there.
  const second = await store.create(ORG, { name: 'same-file', description: '', module: { digest, size: bytes.length, bytes }, permissions }, Date.now());
  const secretNames = new SecretNames(ledger);
  // Set through this runtime once (the runner has lost them since); NEVER_SET never was, so it is not required.
  await secretNames.set(ORG, first.id, 'API_TOKEN');
  await secretNames.set(ORG, second.id, 'API_TOKEN');
  const invoker = createSecretRequiringInvoker(createRestoringInvoker(counted, store), secretNames);
  compiles = 0;
  const call = (actionId: string, simulate = false) => invoker.invoke(invocation(digest, { orgId: ORG, actionId, permissions, ...(simulate ? { simulate: true } : {}) }));
  const refused = await failure(call(first.id));
  assert.deepEqual([refused.code, refused.status, refused instanceof CallNotSentError], ['secrets_missing_on_runner', 503, true], 'retryable, and never sent');
  assert.match(refused.message, /API_TOKEN/);
  assert.match(refused.message, /POST \/organizations\/acct-restore\/custom-actions\/.+\/secrets/, 'it says how to set them');
  assert.doesNotMatch(refused.message, /NEVER_SET/);
  assert.equal(compiles, 1, 'the module is back (the runner refuses the call only once it has the module)');
  // A simulation reads no secret: it runs.
  assert.equal((await invoker.invoke(invocation(digest, { orgId: ORG, actionId: first.id, permissions, simulate: true, idempotencyKey: 'sim:1' }))).outcome.kind, 'output');
  assert.equal(compiles, 1);
  // The module is on the runner now; the other action's call is still held back.
  assert.equal((await failure(call(second.id))).code, 'secrets_missing_on_runner');
  await runner.client.putSecret({ orgId: ORG, actionId: first.id, key: 'API_TOKEN', value: 'secret-value-1234' });
  assert.equal((await call(first.id)).outcome.kind, 'output');
  assert.equal((await failure(call(second.id))).code, 'secrets_missing_on_runner', 'per action');
  assert.equal(compiles, 1);
});

test('a module whose stored bytes the runner finds damaged is sent again and runs; the bytes it stored again last past a restart', async () => {
  const echo = await assembleWat('echo-damaged', ECHO_WAT.replace('(memory (export "memory") 1)', '(memory (export "memory") 1) (global i32 (i32.const 7))'));
  const { actionId, digest } = await kept('echo-damaged', echo);
  const invoker = createRestoringInvoker(counted, store);
  await invoker.invoke(invocation(digest, { orgId: ORG, actionId }));
  // Stopped, one byte of its copy flipped on disk, started again (its compiled cache is gone).
  await runner.child.stop();
  const runnerStore = openRunnerStore(runner.dataDir);
  const damaged = Buffer.from(runnerStore.modules.get(digest)!);
  damaged[damaged.length - 1]! ^= 0xff;
  await runnerStore.modules.put(digest, damaged);
  await runnerStore.close();
  await runner.restart();
  await assert.rejects(runner.client.invoke(invocation(digest, { orgId: ORG, actionId })), (error: SluiceError) => error.code === 'module_corrupt');

  compiles = 0;
  const result = await invoker.invoke(invocation(digest, { orgId: ORG, actionId, payloadJson: '{"after":"repair"}' }));
  assert.equal(compiles, 1, 'the kept bytes were sent');
  assert.deepEqual(result.outcome.kind === 'output' && parseOutput(result.outcome.outputJson)['payload'], { after: 'repair' });
  await runner.restart();
  const again = await runner.client.invoke(invocation(digest, { orgId: ORG, actionId, payloadJson: '{"after":"restart"}' }));
  assert.deepEqual(again.outcome.kind === 'output' && parseOutput(again.outcome.outputJson)['payload'], { after: 'restart' }, 'the runner holds intact bytes again');
});
