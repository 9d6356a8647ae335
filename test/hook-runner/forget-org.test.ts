// ForgetOrg through the real runner: a deleted org's secrets, records of calls, fences and the
// modules no other org uses leave the store (byte for byte: only its mark stays), its uploads, calls
// and secret writes are refused from then on, across a restart too; orgs beside it (one whose id it
// prefixes among them) keep everything, modules they call that it uploaded too; a second ForgetOrg
// removes nothing more. (A call running meanwhile:
// invocation-ledger.test.ts; chunks and a removal cut short: forgotten-orgs.test.ts.)
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SluiceError } from '../../runtime/errors.ts';
import { invocation, type RunnerFixture, startRunnerWithEcho } from '../helpers/hook-runner.ts';
import { assembleWat, ECHO_WAT, HEX_ECHO_WAT } from '../helpers/hook-runner-wat.ts';

import { scanFor } from '../helpers/ledger-scan.ts';

const GONE = 'org_gone';
const KEPT = 'org_kept';
/** Its id starts with the forgotten org's. */
const NEIGHBOUR = 'org_gone2';

let runner: RunnerFixture;
let echo: string;

before(async () => ({ runner, echo } = await startRunnerWithEcho()));
after(() => runner.close());

/** Two actions' secrets and three recorded calls (each its own run, so its own fence) of `orgId`. */
async function use(orgId: string): Promise<void> {
  await runner.client.putSecret({ orgId, actionId: 'act_a', key: 'KEY_A', value: `a of ${orgId}` });
  await runner.client.putSecret({ orgId, actionId: 'act_b', key: 'KEY_B', value: `b of ${orgId}` });
  for (const run of ['run_1', 'run_2', 'run_3']) {
    await runner.client.invoke(invocation(echo, { orgId, actionId: 'act_a', idempotencyKey: `${run}:step_1`, permissions: ['read_secret:KEY_A'], requiredSecretKeys: ['KEY_A'], fence: 2 }));
  }
}

const failsWith = (code: string) => (error: unknown): boolean => {
  assert.ok(error instanceof SluiceError, String(error));
  assert.equal(error.code, code);
  return true;
};
const isForgotten = failsWith('organization_forgotten');

describe('ForgetOrg', () => {
  it('removes the org\'s secrets, records and fences, refuses its calls from then on, and leaves every other org whole', async () => {
    for (const org of [GONE, KEPT, NEIGHBOUR]) await use(org);
    // A module only the org uploads; one sent back for it (a runner that lost it) that another org,
    // whose version has the same bytes, then only calls; and the echo (also uploaded with no org
    // named, as modules stored before uploads named theirs are kept).
    const ownBytes = await assembleWat('hex-echo', HEX_ECHO_WAT);
    const own = await runner.client.compile(ownBytes, GONE);
    const sharedBytes = await assembleWat('named-echo', ECHO_WAT, { names: true });
    const shared = await runner.client.compile(sharedBytes, GONE, true);
    assert.equal((await runner.client.invoke(invocation(shared, { orgId: KEPT }))).replayed, false);
    assert.equal(await runner.client.compile(await assembleWat('echo', ECHO_WAT), GONE), echo);
    assert.equal(new Set([own, shared, echo]).size, 3);

    // 2 secrets + their 2 revision marks, 3 records of calls + 3 time entries, 3 fences + 3 time
    // entries; its 3 uses of modules and the 1 module no one else uploaded.
    assert.equal(await runner.client.forgetOrg(GONE), 20);
    assert.equal(await runner.client.forgetOrg(GONE), 0, 'nothing more the second time');

    assert.deepEqual(await runner.client.listSecretKeys({ orgId: GONE, actionId: 'act_a' }), []);
    await assert.rejects(runner.client.invoke(invocation(echo, { orgId: GONE, actionId: 'act_a', idempotencyKey: 'run_1:step_1', fence: 2 })), isForgotten);
    await assert.rejects(runner.client.invoke(invocation(echo, { orgId: GONE, actionId: 'act_a', simulate: true })), isForgotten);
    await assert.rejects(runner.client.putSecret({ orgId: GONE, actionId: 'act_a', key: 'KEY_A', value: 'again' }), isForgotten);
    await assert.rejects(runner.client.compile(ownBytes, GONE), isForgotten);
    // Its own module is gone, compiled form too; the shared one runs for the org that shares it.
    await assert.rejects(runner.client.invoke(invocation(own, { orgId: KEPT })), failsWith('module_not_found'));
    assert.equal((await runner.client.invoke(invocation(shared, { orgId: KEPT }))).replayed, false);

    for (const org of [KEPT, NEIGHBOUR]) {
      assert.deepEqual(await runner.client.listSecretKeys({ orgId: org, actionId: 'act_b' }), ['KEY_B']);
      // Its record stays: the same key answers from it.
      const again = await runner.client.invoke(invocation(echo, { orgId: org, actionId: 'act_a', idempotencyKey: 'run_1:step_1', permissions: ['read_secret:KEY_A'], requiredSecretKeys: ['KEY_A'], fence: 2 }));
      assert.equal(again.replayed, true, org);
    }

    // The mark is durable: a new runner process refuses the org too.
    await runner.restart();
    await assert.rejects(runner.client.invoke(invocation(echo, { orgId: GONE, actionId: 'act_a', idempotencyKey: 'run_9:step_1', fence: 2 })), isForgotten);
    await assert.rejects(runner.client.invoke(invocation(own, { orgId: KEPT })), failsWith('module_not_found'), 'its bytes left the store');
    for (const digest of [shared, echo]) assert.equal((await runner.client.invoke(invocation(digest, { orgId: KEPT }))).replayed, false, digest);

    await runner.close({ keepData: true });
    // Byte for byte: nothing names the org but its mark (module bytes hold no org; their uses went).
    const left = scanFor(join(runner.dataDir, 'hook-runner', 'runner.mdb'), GONE, KEPT, ['forgotten-orgs', 'data-format']);
    // The neighbour's records hold the forgotten org's id as the start of its own.
    assert.deepEqual(left.found.filter((line) => !line.includes(NEIGHBOUR)), []);
    assert.ok(left.found.length >= 16, 'the neighbour\'s records are all there');
    assert.ok(left.othersRecords >= 16, `the scan read the kept org's records: ${left.othersRecords}`);
  });
});
