// Crash safety of schedules: two yearly schedules made with a clock set a year back owe their
// newest tick when `sluice serve` starts. The runtime is SIGKILLed as soon as it listens (ticks in
// flight), then again as soon as a tick event is readable (maybe not yet flushed), and restarted on
// the same data dir each time. Each tick must end up as exactly one event with one completed run.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, spawnRuntime, startRuntime, tempDir, type ChildRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-crash-schedules';
/** The newest 1 January 00:00 UTC at or before now: the tick both schedules owe. */
const OWED = new Date(Date.UTC(new Date().getUTCFullYear(), 0, 1)).toISOString();

async function tickEvents(url: string, key: string, type: string): Promise<Array<{ payload: { scheduled_for: string } }>> {
  const answer = await call(url, 'GET', `/organizations/${ORG}/events?type=${type}`, { token: key });
  return answer.body?.events ?? [];
}

test('SIGKILL while owed ticks are sent: each tick is one event with one completed run', async () => {
  const dataDir = tempDir();
  const receiver = await startReceiver();
  let runtime: ChildRuntime | undefined;
  try {
    // Made in-process with a clock a year back: each schedule's last tick is then a year old.
    const past = await startRuntime({ clock: new ManualClock(Date.parse(OWED) - 86_400_000), dataDir });
    const key = await createOrg(past.url, ADMIN_TOKEN, ORG);
    for (const name of ['first', 'second']) {
      const type = `new-year.${name}`;
      const wf = await call(past.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: type, steps: [{ id: 'post', type: 'webhook', url: `${receiver.url}/${name}` }] } });
      assert.equal(wf.status, 201, wf.text);
      const schedule = await call(past.url, 'POST', `/organizations/${ORG}/schedules`, { token: key, json: { name, cron: '0 0 1 1 *', event_type: type } });
      assert.equal(schedule.status, 201, schedule.text);
    }
    await past.close();

    runtime = await spawnRuntime(dataDir);
    runtime.child.kill('SIGKILL');
    await runtime.exited;
    runtime = await spawnRuntime(dataDir);
    const url = runtime.url;
    await eventually('a tick event to be readable', () => tickEvents(url, key, 'new-year.first'), (events) => events.length > 0, 20_000);
    runtime.child.kill('SIGKILL');
    await runtime.exited;
    runtime = await spawnRuntime(dataDir);
    const rt = runtime;

    for (const name of ['first', 'second']) {
      const events = await eventually(`the ${name} tick`, () => tickEvents(rt.url, key, `new-year.${name}`), (list) => list.length > 0, 20_000);
      assert.deepEqual(events.map((e) => e.payload.scheduled_for), [OWED], `${name}: one event, for the owed tick`);
    }
    const runs = await eventually('both runs completed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs`, { token: key })).body.runs as Array<{ state: string }>, (list) => list.length === 2 && list.every((r) => r.state === 'completed'), 20_000);
    assert.equal(runs.length, 2);
    for (const name of ['first', 'second']) {
      const keys = new Set(receiver.received.filter((r) => r.path === `/${name}`).map((r) => r.headers['idempotency-key']));
      assert.equal(keys.size, 1, `${name}: every delivery carries the one run's idempotency key`);
    }
  } finally {
    runtime?.child.kill('SIGKILL');
    await runtime?.exited;
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
