// Crash safety of ingest: every 204 is on disk. SIGKILL right after the answers, restart on the same
// data dir, find every acknowledged event and its inbox claim. Also: SIGTERM shuts down cleanly.

import assert from 'node:assert/strict';
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ADMIN_TOKEN, spawnRuntime, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { holdLedgerWrites, type WriteHold } from '../helpers/lmdb-write-hold.ts';
import { watchCalls } from '../helpers/method-gate.ts';

const SECRET = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;

async function prepare(url: string): Promise<string> {
  const key = await createOrg(url, ADMIN_TOKEN, 'acct-crash');
  const source = await call(url, 'POST', '/organizations/acct-crash/sources', { token: key, json: { name: 'in', secrets: [SECRET] } });
  assert.equal(source.status, 201);
  return key;
}

function deliver(url: string, id: string): Promise<{ status: number; eventId: string | null }> {
  const body = JSON.stringify({ type: 'crash.test', id });
  return call(url, 'POST', '/hooks/acct-crash/in', { body, headers: signStandard(SECRET, id, Math.floor(Date.now() / 1000), body) }).then(
    (r) => ({ status: r.status, eventId: r.headers.get('sluice-event-id') }),
    () => ({ status: 0, eventId: null }),
  );
}

/** The replies the runtime has written to webhook deliveries, counted per status (the request histogram's counts). */
async function ingestReplies(rt: TestRuntime): Promise<number[]> {
  const { values } = await rt.runtime.context.metrics.httpRequestSeconds.get();
  return values.filter((v) => v.metricName?.endsWith('_count') === true && v.labels['route'] === 'ingest').map((v) => v.value);
}

test('SIGKILL after the answers loses no acknowledged event; repeats stay 409 after restart', async () => {
  const dataDir = tempDir();
  try {
    const first = await spawnRuntime(dataDir);
    const key = await prepare(first.url);
    const acknowledged = new Map<string, string>();
    // Keep writes in flight while the process dies: the kill lands as soon as 150 answers are in.
    const inFlight: Promise<void>[] = [];
    let killed = false;
    for (let i = 0; i < 300; i++) {
      const id = `msg_${i}`;
      inFlight.push(
        deliver(first.url, id).then(({ status, eventId }) => {
          if (status === 204 && eventId !== null && !killed) acknowledged.set(id, eventId);
          if (acknowledged.size >= 150 && !killed) {
            killed = true;
            first.child.kill('SIGKILL');
          }
        }),
      );
    }
    await Promise.all(inFlight);
    if (!killed) first.child.kill('SIGKILL');
    assert.equal(await first.exited, 'SIGKILL');
    assert.ok(acknowledged.size >= 150, `acknowledged ${acknowledged.size}`);

    const second = await spawnRuntime(dataDir);
    try {
      for (const [id, eventId] of acknowledged) {
        const event = await call(second.url, 'GET', `/organizations/acct-crash/events/${eventId}`, { token: key });
        assert.equal(event.status, 200, `event ${eventId} of ${id} survived`);
        assert.equal(event.body.event.provider_event_id, id);
      }
      const sample = [...acknowledged.keys()].slice(0, 20);
      for (const id of sample) {
        const repeat = await deliver(second.url, id);
        assert.equal(repeat.status, 409, `${id} is still claimed`);
      }
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('no 204 goes out before its write has committed: with the write lock held elsewhere none comes, and all come once it is let go', async () => {
  // The burst above cannot tell an answer sent before the commit from one sent after: the kill
  // lands long after the commits. Here the commits cannot happen until the hold ends. The runtime
  // runs in this process (on LMDB in its data dir) so the test sees each delivery reach its write.
  const dataDir = tempDir();
  try {
    const rt = await startRuntime({ dataDir });
    let hold: WriteHold | undefined;
    try {
      await prepare(rt.url);
      hold = await holdLedgerWrites(dataDir);
      const writes = watchCalls(rt.runtime.context.events, 'store', 20);
      const answered: number[] = [];
      const deliveries = Array.from({ length: 20 }, (_, i) => deliver(rt.url, `held_${i}`).then(({ status }) => void answered.push(status)));
      // Every delivery has issued its write (or, should one not get that far, all are answered): one
      // answered without waiting for its commit is answered in the same turn, before the runtime
      // takes the next request. Reads go on meanwhile.
      let bound: NodeJS.Timeout | undefined;
      const tooLong = new Promise<never>((_, reject) => {
        bound = setTimeout(() => reject(new Error(`only ${writes.count()} of 20 deliveries reached their write within 30 s, none answered`)), 30_000);
      });
      await Promise.race([writes.made, Promise.all(deliveries), tooLong]).finally(() => clearTimeout(bound));
      writes.restore();
      assert.equal((await call(rt.url, 'GET', '/healthz')).status, 200);
      assert.deepEqual(await ingestReplies(rt), [], 'no delivery answered (the runtime wrote no reply)');
      assert.deepEqual(answered, [], 'nothing answered while its commit cannot happen');
      await hold.release();
      hold = undefined;
      await Promise.all(deliveries);
      assert.deepEqual(answered, Array.from({ length: 20 }, () => 204));
      assert.equal((await ingestReplies(rt)).reduce((sum, n) => sum + n, 0), 20, 'each reply counted where the runtime writes it');
    } finally {
      await hold?.release();
      await rt.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('SIGTERM exits 0 (requests in flight at a stop: test/http/stop-drains-requests.test.ts); the admin token file is 0600', async () => {
  const dataDir = tempDir();
  try {
    const runtime = await spawnRuntime(dataDir, 'serve', [], 'file');
    const tokenFile = join(dataDir, 'admin-token');
    assert.equal(statSync(tokenFile).mode & 0o777, 0o600);
    assert.ok(runtime.output.some((line) => line.includes('admin-token')), 'the token file is named on start');
    assert.ok(runtime.output.some((line) => line.includes('curl')), 'an example request is printed');
    runtime.child.kill('SIGTERM');
    assert.equal(await runtime.exited, 0);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
