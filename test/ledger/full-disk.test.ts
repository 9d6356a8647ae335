// A runtime whose disk fills answers the requests it cannot store with a retryable 503 and keeps
// serving: the data file is held to 4 MiB by a file-size limit (SIGXFSZ ignored, so a write past
// it fails with EFBIG, as one on a full disk fails with ENOSPC). It used to die at the first failed commit.
// A start whose own writes fail says so in one line.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, ROOT, startRuntime, tempDir } from '../helpers/runtime.ts';
import { underFileSizeLimit } from '../helpers/file-size-limit.ts';

test('a full disk: writes answer 503 write_failed with Retry-After, reads go on, nothing acknowledged is lost', { timeout: 120_000 }, async () => {
  const dataDir = tempDir('sluice-full-disk-');
  const serve = [process.execPath, '--import', 'tsx', 'runtime/cli.ts', 'serve', '--port', '0', '--data-dir', dataDir, '--admin-token', ADMIN_TOKEN, '--log-level', 'error'];
  const child = spawn('bash', underFileSizeLimit(4096, serve), { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | string>((done) => child.once('exit', (code, signal) => done(code ?? signal ?? 'unknown')));
  // Sluice's JSON log lines (lmdb-js also prints lines of its own on stderr).
  const logged: { message: string; cause?: string }[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => {
    if (line.startsWith('{')) logged.push(JSON.parse(line) as { message: string; cause?: string });
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        const match = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
        if (match?.[1] !== undefined) resolve(match[1]);
      });
      void exited.then((code) => reject(new Error(`exited (${code}) before listening`)));
    });
    const key = await createOrg(url, ADMIN_TOKEN, 'acct-full', 'pro');
    const secret = newStandardSecret();
    const source = await call(url, 'POST', '/organizations/acct-full/sources', { token: key, json: { name: 'psp', secrets: [secret] } });
    assert.equal(source.status, 201, source.text);
    const acknowledged: string[] = [];
    let refused: Awaited<ReturnType<typeof call>> | undefined;
    for (let i = 0; i < 10_000 && refused === undefined; i += 1) {
      const sent = await call(url, 'POST', '/organizations/acct-full/events', { token: key, json: { type: 'a.b', payload: { filler: 'y'.repeat(1000) }, id: `e-${i}` } });
      if (sent.status === 202) acknowledged.push(`e-${i}`);
      else refused = sent;
    }
    assert.ok(refused !== undefined && acknowledged.length > 100, `the disk filled after ${acknowledged.length} events`);
    assert.deepEqual([refused.status, refused.body.error.code, refused.headers.get('retry-after')], [503, 'write_failed', '5']);
    // A webhook refused the same way is counted by its code, not as an internal error.
    const body = JSON.stringify({ type: 'a.b', filler: 'z'.repeat(1000) });
    const hook = await call(url, 'POST', '/hooks/acct-full/psp', { body, headers: signStandard(secret, 'msg_full_disk', Math.floor(Date.now() / 1000), body) });
    assert.deepEqual([hook.status, hook.body.error?.code], [503, 'write_failed']);
    const metrics = (await call(url, 'GET', '/metrics')).text;
    assert.match(metrics, /^sluice_ingest_total\{outcome="write_failed"\} 1$/m);
    assert.doesNotMatch(metrics, /outcome="internal_error"/);
    assert.equal((await call(url, 'GET', '/healthz')).status, 200, 'still serving');
    // A duplicate writes nothing: it is answered at once, not left waiting on the failed batch's flush
    // (which lmdb-js never settles), and so is one sent right after another failed write.
    for (let round = 0; round < 2; round++) {
      const duplicate = call(url, 'POST', '/organizations/acct-full/events', { token: key, json: { type: 'a.b', payload: {}, id: acknowledged.at(-1)! } });
      const answered = await Promise.race([duplicate, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 10_000).unref())]);
      assert.equal(answered?.status, 409, `round ${round}: ${answered?.text ?? 'no answer within 10 s'}`);
      const again = await call(url, 'POST', '/organizations/acct-full/events', { token: key, json: { type: 'a.b', payload: { filler: 'y'.repeat(1000) }, id: `past-full-${round}` } });
      assert.equal(again.status, 503);
    }
    for (const id of [acknowledged[0]!, acknowledged.at(-1)!]) assert.equal((await call(url, 'GET', `/organizations/acct-full/events/${id}`, { token: key })).status, 200, id);
    // One rate-limited line names the commit's own error; the requests it failed add none of their own.
    const failures = await eventually('the commit failure logged', () => logged.filter((entry) => entry.message === 'ledger commit failed'), (lines) => lines.length > 0);
    // The OS's own error: which one the file size limit gives (EFBIG, or EIO) depends on where the
    // commit that crosses it stands, which moves with what the data file holds (a start's boot record).
    assert.match(failures[0]!.cause ?? '', /File too large|Input\/output error/);
    assert.deepEqual(logged.filter((entry) => entry.message !== 'ledger commit failed'), [], 'no other error lines');
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    // A stop that closed LMDB lets go of the data dir; lmdb-js's close waited for the failed batch's flush for ever.
    assert.equal(existsSync(join(dataDir, 'runtime', 'owner.pid')), false, 'the stop finished closing the ledger');
  } finally {
    child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a start whose writes the full disk refuses exits 1 saying the store could not commit a write, and why', { timeout: 120_000 }, async () => {
  const dataDir = tempDir('sluice-full-start-');
  const serve = [process.execPath, '--import', 'tsx', 'runtime/cli.ts', 'serve', '--port', '0', '--data-dir', dataDir, '--admin-token', ADMIN_TOKEN, '--log-level', 'error'];
  try {
    // A data dir a first start made (past 16 KiB), then a start that may not write past 16 KiB.
    const seeded = await startRuntime({ dataDir });
    await seeded.close();
    const child = spawn('bash', underFileSizeLimit(16, serve), { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    try {
      const code = await new Promise<number | string>((done) => child.once('exit', (exitCode, signal) => done(exitCode ?? signal ?? 'unknown')));
      assert.equal(code, 1, stderr);
      assert.match(stderr, /^sluice: the data dir's store could not commit a write \(File too large[^\n]*\); if its disk is full, free space and start again/m, stderr);
    } finally {
      child.kill('SIGKILL');
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
