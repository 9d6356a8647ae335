// A stored module that this release's sandbox refuses to compile again (an earlier release took it:
// a computed initializer) with the real runner process: a call the runner completed under it is
// still answered from its record, and a new call fails saying why and what to do.

import assert from 'node:assert/strict';
import { createHash, createSecretKey, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { invocationInputs } from '../../hook-runner/handlers.ts';
import { InvocationLedger } from '../../hook-runner/invocation-ledger.ts';
import type { SecretScope } from '../../hook-runner/requests.ts';
import { openRunnerStore } from '../../hook-runner/store.ts';
import { SecretVault } from '../../hook-runner/vault.ts';
import { TerminalError } from '../../runtime/errors.ts';
import { invocation, startRunner, tempDataDir } from '../helpers/hook-runner.ts';
import { assemble } from './fixtures/wat.ts';

const scope = { orgId: 'org_recompile', actionId: 'act_recompile' };

test('a call completed under a module the sandbox now refuses is answered from its record; a new one says why it cannot run', async () => {
  const dataDir = tempDataDir();
  // What an earlier release stored: an extended-const initializer, refused at compile since.
  const bytes = await assemble(`(module (memory (export "memory") 1)
    (global $base i32 (i32.add (i32.const 1000) (i32.const 24)))
    (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))`, { features: { extended_const: true }, validate: false });
  const digest = createHash('sha256').update(bytes).digest('hex');
  const store = openRunnerStore(dataDir);
  const vault = new SecretVault(store, createSecretKey(randomBytes(32)));
  await store.durable(store.modules.put(digest, Buffer.from(bytes)));
  const claim = { ...scope, digest, inputs: invocationInputs([], vault.revision(scope as SecretScope, [])), idempotencyKey: 'run_recompile:step_1', runId: 'run_recompile', fence: 1n };
  await new InvocationLedger(store, Date.now).run(claim, async () => ({ outcome: { kind: 'output', outputJson: '{"done":true}' }, fuelUsed: 5 }));
  await store.close();

  const runner = await startRunner({ dataDir });
  try {
    const recorded = await runner.client.invoke(invocation(digest, { ...scope, idempotencyKey: claim.idempotencyKey, fence: 2 }));
    assert.deepEqual([recorded.replayed, recorded.outcome], [true, { kind: 'output', outputJson: '{"done":true}' }]);
    await assert.rejects(runner.client.invoke(invocation(digest, { ...scope, idempotencyKey: 'run_new:step_1' })), (error: unknown) => {
      assert.ok(error instanceof TerminalError, String(error));
      assert.equal(error.code, 'module_recompile_failed');
      assert.match(error.message, /no longer compiles on this runner \(.*is computed.*\); upload a rebuilt module/);
      return true;
    });
  } finally {
    await runner.close();
  }
});
