// A deletion survives a crash: a runtime process (spawned, real LMDB) is killed with SIGKILL right
// after it answered the DELETE of an org holding thousands of events and runs, wherever its removal
// had got to; the next start finishes it, and then not one byte of the org is left in the ledger,
// while the other org's events and runs are all there. On LMDB only: a process is killed and its
// data dir opened again.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { call, createOrg } from '../helpers/http.ts';
import { scanFor } from '../helpers/ledger-scan.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, spawnRuntime, startRuntime, tempDir } from '../helpers/runtime.ts';

const DOOMED = 'doomed-c9';
const KEEPER = 'keeper-c9';
const EVENTS = 2_000;

test('a deletion killed part way is finished by the next start, leaving nothing of the org', async () => {
  const dataDir = tempDir();
  try {
    const child = await spawnRuntime(dataDir, 'serve', ['--runner', 'off']);
    const keys = new Map<string, string>();
    for (const org of [DOOMED, KEEPER]) {
      const key = await createOrg(child.url, ADMIN_TOKEN, org, 'enterprise');
      keys.set(org, key);
      const workflow = { name: 'w', trigger_event: 'go', steps: [{ type: 'delay', duration_ms: 1 }] };
      assert.equal((await call(child.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: workflow })).status, 201);
    }
    const send = async (org: string, count: number): Promise<void> => {
      for (let from = 0; from < count; from += 100) {
        const batch = Array.from({ length: Math.min(100, count - from) }, (_, i) => call(child.url, 'POST', `/organizations/${org}/events`, { token: keys.get(org)!, json: { type: 'go', payload: { n: from + i }, id: `e-${from + i}` } }));
        for (const answer of await Promise.all(batch)) assert.equal(answer.status, 202, answer.text);
      }
    };
    await send(DOOMED, EVENTS);
    await send(KEEPER, 50);

    const deleted = await call(child.url, 'DELETE', `/organizations/${DOOMED}`, { token: ADMIN_TOKEN });
    assert.equal(deleted.status, 202, deleted.text);
    child.child.kill('SIGKILL');
    await child.exited;

    const rt = await startRuntime({ dataDir, args: ['--runner', 'off'] });
    try {
      assert.equal((await call(rt.url, 'GET', `/organizations/${DOOMED}`, { token: ADMIN_TOKEN })).status, 404);
      // The start's first pruning pass takes the deletion up again.
      await eventually('the deletion finished', async () => (await call(rt.url, 'GET', `/organizations/${DOOMED}/deletion`, { token: ADMIN_TOKEN })).body.deletion.state, (state) => state === 'removed');
      const runs = await eventually('the other org\'s runs done', async () => (await call(rt.url, 'GET', `/organizations/${KEEPER}/runs?limit=100`, { token: keys.get(KEEPER)! })).body.runs as Array<{ state: string }>, (r) => r.length === 50 && r.every((run) => run.state === 'completed'));
      assert.equal(runs.length, 50);
    } finally {
      await rt.runtime.close();
    }
    const left = scanFor(join(dataDir, 'runtime'), DOOMED, KEEPER, ['deleted-orgs']);
    assert.deepEqual(left.found, []);
    assert.ok(left.othersRecords >= 50 * 4, `the other org's records are all there: ${left.othersRecords}`);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
