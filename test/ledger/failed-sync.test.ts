// A disk that fails a commit's own sync (fdatasync EIO, injected with libfiu; see
// helpers/fault-injection.ts). LMDB had already made the commit visible, so the write took and
// whether it reached the disk is unknown: it is answered 503 write_unconfirmed, not "nothing was
// kept". Linux may then have dropped the unwritten pages and let a later fsync succeed over them,
// so the process trusts no later sync: it stops (exit 1), saying why, for a restart to reopen the
// store. The runtime's ledger and the hook-runner's store behave the same (flush-watch.ts).

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';
import { spawnRunnerCommand, tempDataDir, type RunnerProcess } from '../helpers/hook-runner.ts';
import { call, createOrg } from '../helpers/http.ts';
import { assertFaultInjectionInstalled, failSyncs, underFaultInjection } from '../helpers/fault-injection.ts';
import { ADMIN_TOKEN, spawnRuntime, startRuntime, tempDir, type ChildRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { uploadApproved } from '../actions/action-fixtures.ts';

before(assertFaultInjectionInstalled);

test("the runtime's disk fails a sync: the write is 503 write_unconfirmed, `sluice serve` stops (exit 1) saying why, and the next start, at the newest synced commit, has every acknowledged event and not the unconfirmed one", { timeout: 120_000 }, async () => {
  const dataDir = tempDir('sluice-failed-sync-');
  const fifos = tempDir('sluice-fiu-');
  const started: ChildRuntime[] = [];
  try {
    const faulty = await spawnRuntime(dataDir, 'serve', ['--runner', 'off'], 'fixed', [], underFaultInjection(join(fifos, 'ctrl')));
    started.push(faulty);
    const key = await createOrg(faulty.url, ADMIN_TOKEN, 'acct-sync');
    const send = (url: string, id: string) => call(url, 'POST', '/organizations/acct-sync/events', { token: key, json: { type: 'a.b', payload: { n: id }, id } });
    const acknowledged = ['e-1', 'e-2', 'e-3'];
    for (const id of acknowledged) assert.equal((await send(faulty.url, id)).status, 202);

    await failSyncs(join(fifos, 'ctrl'), faulty.child.pid!);
    const unconfirmed = await send(faulty.url, 'e-unconfirmed');
    assert.deepEqual([unconfirmed.status, unconfirmed.body.error?.code, unconfirmed.headers.get('retry-after')], [503, 'write_unconfirmed', '5'], unconfirmed.text);
    assert.match(unconfirmed.body.error.message, /it may have been stored\. .*send it again with the same id, which is refused with 409 if it was kept/);
    assert.equal(await faulty.exited, 1, faulty.output.join('\n'));
    assert.match(faulty.output.join('\n'), /sluice: the data dir's disk failed to sync a commit \(Input\/output error\); exiting at once, so that no write is answered as stored on a disk that may not keep it\. Check the disk \(and free space\), then start again/);

    const next = await spawnRuntime(dataDir, 'serve', ['--runner', 'off']);
    started.push(next);
    for (const id of acknowledged) assert.equal((await call(next.url, 'GET', `/organizations/acct-sync/events/${id}`, { token: key })).status, 200, id);
    // The store reopens at its newest synced commit (SYNCED_RESTORE): the unconfirmed event's commit
    // never synced (the faults stayed on to the end), so it is not there, and sent again it is stored.
    assert.equal((await call(next.url, 'GET', '/organizations/acct-sync/events/e-unconfirmed', { token: key })).status, 404);
    assert.equal((await send(next.url, 'e-unconfirmed')).status, 202);
  } finally {
    for (const { child } of started) child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(fifos, { recursive: true, force: true });
  }
});

test("the hook-runner's disk fails a sync: the secret change is 503 write_unconfirmed, the runner stops (exit 1) saying why, and started again at its newest synced commit it holds the secrets set before, not the unconfirmed one", { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir();
  const fifos = tempDir('sluice-fiu-');
  const listen = ['--listen', `unix:${join(dataDir, 'runner.sock')}`, '--data-dir', dataDir];
  const runners: RunnerProcess[] = [];
  let rt: TestRuntime | undefined;
  try {
    // The action is uploaded (compiled, in a child process) before the faults: under libfiu's
    // preload that spawn at times fails (EBUSY).
    const first = spawnRunnerCommand(listen);
    runners.push(first);
    rt = await startRuntime({ dataDir, args: ['--runner', await first.listening] });
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-runner-sync');
    const actionId = await uploadApproved(rt.url, 'acct-runner-sync', key, 'echo', await assembleWat('echo', ECHO_WAT));
    const secrets = `/organizations/acct-runner-sync/custom-actions/${actionId}/secrets`;
    assert.equal((await call(rt.url, 'POST', secrets, { token: key, json: { key: 'KEPT', value: 'v1' } })).status, 204);
    first.process.kill('SIGTERM');
    assert.equal(await first.exited, 0);

    const faulty = spawnRunnerCommand(listen, {}, undefined, underFaultInjection(join(fifos, 'ctrl')));
    runners.push(faulty);
    await faulty.listening;
    await failSyncs(join(fifos, 'ctrl'), faulty.process.pid!);
    const unconfirmed = await call(rt.url, 'POST', secrets, { token: key, json: { key: 'LATE', value: 'v2' } });
    assert.deepEqual([unconfirmed.status, unconfirmed.body.error?.code], [503, 'write_unconfirmed'], unconfirmed.text);
    assert.equal(await faulty.exited, 1, faulty.output.join('\n'));
    assert.match(faulty.output.join('\n'), /hook-runner: exiting at once: its store's disk failed to sync a commit \(Input\/output error\)/);

    const next = spawnRunnerCommand(listen);
    runners.push(next);
    await next.listening;
    // Reopened at its newest synced commit, as the runtime's ledger is: the unconfirmed secret is not there.
    assert.deepEqual((await call(rt.url, 'GET', secrets, { token: key })).body, { keys: ['KEPT'] });
    assert.equal((await call(rt.url, 'POST', secrets, { token: key, json: { key: 'LATE', value: 'v2' } })).status, 204);
    assert.deepEqual((await call(rt.url, 'GET', secrets, { token: key })).body, { keys: ['KEPT', 'LATE'] });
  } finally {
    await rt?.close();
    for (const runner of runners) runner.process.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(fifos, { recursive: true, force: true });
  }
});
