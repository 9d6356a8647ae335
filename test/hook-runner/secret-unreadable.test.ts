// A secret the runner cannot open (started with another master key, or its sealed bytes damaged) is
// the deployment's fault, not the guest's: the call is refused before the guest runs, as a call
// never sent (retried, and its attempt never started), saying what to fix. Real runner processes.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { CallNotSentError } from '../../runtime/hook-runner/runner-errors.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';
import { invocation, newMasterKey, startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';

const PERMISSIONS = ['read_secret:API_TOKEN'];
const running: RunnerFixture[] = [];
after(async () => {
  for (const runner of running) await runner.close().catch(() => undefined);
});

test('a call reading a secret sealed under another master key fails retryably, never sent, and runs under the right key', async () => {
  const sealedUnder = newMasterKey();
  const first = await startRunner({ masterKey: sealedUnder });
  const digest = await first.client.compile(await assembleWat('echo', ECHO_WAT));
  await first.client.putSecret({ orgId: 'org_test', actionId: 'act_test', key: 'API_TOKEN', value: 'sk_live_sealed_value' });
  await first.close({ keepData: true });

  const wrongKey = await startRunner({ dataDir: first.dataDir, masterKey: newMasterKey() });
  running.push(wrongKey);
  const error = await wrongKey.client.invoke(invocation(digest, { permissions: PERMISSIONS })).then(
    () => assert.fail('the call ran'),
    (failure: unknown) => failure,
  );
  assert.ok(error instanceof CallNotSentError, String(error));
  assert.equal(error.code, 'secret_unreadable');
  assert.match(error.message, /API_TOKEN/);
  assert.match(error.message, /master key/);
  assert.match(error.message, /retried/);
  assert.doesNotMatch(error.message, /sk_live_sealed_value/);
  await wrongKey.close({ keepData: true });
  running.pop();

  const rightKey = await startRunner({ dataDir: first.dataDir, masterKey: sealedUnder });
  running.push(rightKey);
  const reply = await rightKey.client.invoke(invocation(digest, { permissions: PERMISSIONS }));
  assert.equal(reply.outcome.kind, 'output');
});
