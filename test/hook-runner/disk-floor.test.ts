// The hook-runner keeps a floor of free space on its disk too: below it, calls that would write (a
// compile, a secret change, a recorded invocation, before its guest runs, forgetting an org) are refused with the
// retryable hook_runner_disk_full, and the rest (health, secret names, simulations) go on. The
// floor here is set above the machine's whole free space (1 TiB), so the real statfs reads below it.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InvokeResult } from '../../runtime/hook-runner/client.ts';
import { CallNotSentError } from '../../runtime/hook-runner/runner-errors.ts';
import { parseHookRunnerFlags } from '../../hook-runner/command.ts';
import { RunnerConfigError } from '../../hook-runner/runner-error.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';
import { invocation, parseOutput, startRunner, waitFor } from '../helpers/hook-runner.ts';

const ABOVE_ANY_DISK_MIB = 1_048_576;
/** The payload the echo guest answered with. */
const echoed = (result: InvokeResult): unknown => (result.outcome.kind === 'output' ? parseOutput(result.outcome.outputJson)['payload'] : result.outcome);
/** Refused as never sent (the attempt did not start), with a Retry-After for API callers. */
const diskFull = (error: unknown): boolean =>
  error instanceof CallNotSentError && error.code === 'hook_runner_disk_full' && error.retryAfterMs === 5000 && /disk is nearly full/.test(error.message);

test('below its disk floor the runner refuses what would write, before any guest runs, and answers the rest', { timeout: 60_000 }, async () => {
  const echo = await assembleWat('echo', ECHO_WAT);
  const roomy = await startRunner();
  const digest = await roomy.client.compile(echo);
  const kept = invocation(digest, { payloadJson: '{"n":1}' });
  assert.deepEqual(echoed(await roomy.client.invoke(kept)), { n: 1 });
  assert.equal((await roomy.client.health()).diskLow, false);
  await roomy.client.putSecret({ orgId: 'org_test', actionId: 'act_test', key: 'API_KEY', value: 'held-before' });
  await roomy.client.putSecret({ orgId: 'org_done', actionId: 'act_test', key: 'API_KEY', value: 'forgotten-before' });
  assert.equal(await roomy.client.forgetOrg('org_done'), 2);
  await roomy.close({ keepData: true });

  const refused = invocation(digest, { payloadJson: '{"n":2}' });
  const full = await startRunner({ dataDir: roomy.dataDir, token: roomy.token, masterKey: roomy.masterKey, child: { minFreeDiskMib: ABOVE_ANY_DISK_MIB } });
  try {
    await waitFor(() => full.logLines.some((line) => line.includes('below its floor')), 'the floor to be crossed');
    assert.deepEqual([(await full.client.health()).ok, (await full.client.health()).diskLow], [true, true], 'it can run guests; its health says why it refuses writes');
    await assert.rejects(full.client.compile(await assembleWat('echo-2', ECHO_WAT.replace('(module', '(module (global i32 (i32.const 7))'))), diskFull);
    await assert.rejects(full.client.putSecret({ orgId: 'org_test', actionId: 'act_test', key: 'API_KEY', value: 'kept-nowhere' }), diskFull);
    assert.equal(await full.client.deleteSecret({ orgId: 'org_test', actionId: 'act_test', key: 'NOT_HELD' }), false, 'a secret it does not hold is simply not there');
    await assert.rejects(full.client.deleteSecret({ orgId: 'org_test', actionId: 'act_test', key: 'API_KEY' }), diskFull);
    assert.deepEqual(await full.client.listSecretKeys({ orgId: 'org_test', actionId: 'act_test' }), ['API_KEY'], 'the one held before is still held');
    await assert.rejects(full.client.invoke(refused), diskFull);
    // Forgetting writes (refused), unless it was done before (answered, writing nothing).
    await assert.rejects(full.client.forgetOrg('org_test'), diskFull);
    assert.equal(await full.client.forgetOrg('org_done'), 0);
    const simulated = await full.client.invoke(invocation(digest, { payloadJson: '{"n":3}', simulate: true }));
    assert.deepEqual(echoed(simulated), { n: 3 }, 'a simulation records nothing and runs');
    // An org's first call of the module would record it as a user: not below the floor, and it runs.
    const first = await full.client.invoke(invocation(digest, { orgId: 'org_new', payloadJson: '{"n":4}', simulate: true }));
    assert.deepEqual(echoed(first), { n: 4 }, 'an org\'s first simulation runs too');
  } finally {
    await full.close({ keepData: true });
  }
  // Refused before its guest ran: nothing was recorded, so the same call runs afresh, not as a replay.
  const again = await startRunner({ dataDir: roomy.dataDir, token: roomy.token, masterKey: roomy.masterKey });
  try {
    const answer = await again.client.invoke(refused);
    assert.deepEqual([answer.replayed, echoed(answer)], [false, { n: 2 }]);
    assert.equal((await again.client.invoke(kept)).replayed, true, 'a call recorded before is still a replay');
  } finally {
    await again.close();
  }
});

test('sluice hook-runner --min-free-disk-mib: default 256, SLUICE_MIN_FREE_DISK_MIB, 0 off, a bad value named', () => {
  assert.equal(parseHookRunnerFlags([]).minFreeDiskMib, 256);
  assert.equal(parseHookRunnerFlags([], { SLUICE_MIN_FREE_DISK_MIB: '512' }).minFreeDiskMib, 512);
  assert.equal(parseHookRunnerFlags(['--min-free-disk-mib', '0'], { SLUICE_MIN_FREE_DISK_MIB: '512' }).minFreeDiskMib, 0);
  for (const bad of ['-1', '1048577', '1.5', 'lots']) {
    assert.throws(() => parseHookRunnerFlags([`--min-free-disk-mib=${bad}`]), (error: unknown) => error instanceof RunnerConfigError && error.message.includes('--min-free-disk-mib'), bad);
  }
  assert.throws(() => parseHookRunnerFlags([], { SLUICE_MIN_FREE_DISK_MIB: 'x' }), /SLUICE_MIN_FREE_DISK_MIB/);
});
