// Boot recovery and admission order: runs still waiting when the runtime stops are admitted after a
// restart in the order they were created, behind the run whose step the stop interrupted.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { call } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-recovery';
/** Enough runs that their run ids (hashes) are in creation order by chance once in 9! restarts. */
const QUEUED = 8;

test('queued runs recovered at boot are admitted first in, first out, behind the interrupted one', { timeout: 30_000 }, async () => {
  const dataDir = tempDir();
  const clock = new ManualClock(Date.UTC(2026, 10, 30, 9, 0, 0));
  const receiver = await startReceiver([{ status: 200, after: new Promise<void>(() => undefined) }]);
  let rt: TestRuntime | undefined;
  try {
    rt = await startRuntime({ clock, dataDir });
    const url = rt.url;
    const org = await call(url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: ORG, name: ORG, plan: 'pro', max_concurrent_runs: 1 } });
    assert.equal(org.status, 201, org.text);
    const key = org.body.api_key as string;
    const workflow = { name: 'w', trigger_event: 'job.run', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/boot` }] };
    assert.equal((await call(url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: workflow })).status, 201);
    const sent = ['b-0', ...Array.from({ length: QUEUED }, (_, i) => `b-${i + 1}`)];
    for (const id of sent) {
      clock.advance(1000);
      assert.equal((await call(url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'job.run', payload: { id }, id } })).status, 202);
    }
    const states = async (): Promise<Map<string, string>> =>
      new Map(((await call(url, 'GET', `/organizations/${ORG}/runs?limit=50`, { token: key })).body.runs as Array<{ event_id: string; state: string }>).map((r) => [r.event_id, r.state]));
    await eventually('b-0 in flight, the others queued', states, (s) => s.size === sent.length && s.get('b-0') === 'running' && [...s.values()].filter((x) => x === 'queued').length === QUEUED);
    await eventually('b-0 at the receiver', () => receiver.received.length, (n) => n === 1);
    await rt.close();
    rt = undefined;

    receiver.script([{ status: 200, body: '{}' }]);
    rt = await startRuntime({ clock, dataDir });
    const restarted = rt.url;
    await eventually(
      'every run completed after the restart',
      async () => (await call(restarted, 'GET', `/organizations/${ORG}/runs?state=completed&limit=50`, { token: key })).body.runs.length as number,
      (n) => n === sent.length,
    );
    const order = receiver.received.slice(1).map((r) => JSON.parse(r.body).event.payload.id as string);
    assert.deepEqual(order, sent, 'the interrupted run first (resume lane), then the queued runs oldest first');
  } finally {
    await rt?.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
