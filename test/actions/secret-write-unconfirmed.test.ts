// A secret change the hook-runner does not answer in time (frozen here with SIGSTOP) is a 503 that
// says it may or may not have been made and to send it again (Retry-After): a runner that wakes
// may still make it (its gRPC deadline counts from when it read the call). Sent again, each ends as
// asked, whichever way the late one went.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';
import { spawnRunnerCommand, tempDataDir, type RunnerProcess } from '../helpers/hook-runner.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { uploadApproved } from './action-fixtures.ts';

const dataDir = tempDataDir();
let runner: RunnerProcess;
let rt: TestRuntime;

before(async () => {
  runner = spawnRunnerCommand(['--listen', '127.0.0.1:0', '--data-dir', dataDir]);
  const address = await runner.listening;
  rt = await startRuntime({ dataDir, args: ['--runner', address], runnerDeadlinesMs: { other: 500 } });
});
after(async () => {
  runner.process.kill('SIGCONT');
  await rt.close();
  runner.process.kill('SIGTERM');
  await runner.exited;
});

test('a secret change the runner did not answer in time is a 503 that says to send it again, and sent again ends as asked', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-frozen');
  const actionId = await uploadApproved(rt.url, 'acct-frozen', key, 'echo', await assembleWat('echo', ECHO_WAT));
  const secrets = `/organizations/acct-frozen/custom-actions/${actionId}/secrets`;
  assert.equal((await call(rt.url, 'POST', secrets, { token: key, json: { key: 'KEPT', value: 'v1' } })).status, 204);

  runner.process.kill('SIGSTOP');
  const unanswered = [
    await call(rt.url, 'DELETE', `${secrets}/KEPT`, { token: key }),
    await call(rt.url, 'POST', secrets, { token: key, json: { key: 'LATE', value: 'v2' } }),
  ];
  for (const answer of unanswered) {
    assert.equal(answer.status, 503, answer.text);
    assert.equal(answer.body.error.code, 'hook_runner_timeout');
    assert.match(answer.body.error.message, /did not answer before its deadline\. The change may or may not have been made: send the same request again \(it is safe to repeat\)\./);
    assert.equal(answer.headers.get('retry-after'), '1');
  }
  runner.process.kill('SIGCONT');

  const again = [
    await call(rt.url, 'DELETE', `${secrets}/KEPT`, { token: key }),
    await call(rt.url, 'POST', secrets, { token: key, json: { key: 'LATE', value: 'v2' } }),
  ];
  assert.deepEqual(again.map((answer) => answer.status), [204, 204], again.map((answer) => answer.text).join('\n'));
  assert.deepEqual((await call(rt.url, 'GET', secrets, { token: key })).body, { keys: ['LATE'] });
  assert.equal((await call(rt.url, 'DELETE', `${secrets}/KEPT`, { token: key })).status, 404, 'named by neither side now');
});
