// The guest slots go to orgs in turn: an org with many waiting calls does not hold another org's
// call behind all of them; within an org, calls keep their order.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTenantTurns } from '../../hook-runner/tenant-turns.ts';

test('a freed slot goes to the next org in turn, not to the oldest call', async () => {
  const turns = createTenantTurns(1);
  const started: string[] = [];
  const ends = new Map<string, () => void>();
  const call = (tenant: string, name: string) =>
    turns.run(tenant, async () => {
      started.push(name);
      await new Promise<void>((resolve) => ends.set(name, resolve));
    });
  const all = [call('busy', 'busy-1'), call('busy', 'busy-2'), call('busy', 'busy-3'), call('busy', 'busy-4'), call('quiet', 'quiet-1'), call('other', 'other-1')];
  assert.deepEqual([turns.active, turns.queued], [1, 5]);
  for (let i = 0; i < 5; i++) {
    ends.get(started.at(-1)!)!();
    await new Promise((resolve) => setImmediate(resolve));
  }
  ends.get(started.at(-1)!)!();
  await Promise.all(all);
  assert.deepEqual(started, ['busy-1', 'busy-2', 'quiet-1', 'other-1', 'busy-3', 'busy-4'], 'each org waiting gets the next slot in turn');
  assert.deepEqual([turns.active, turns.queued], [0, 0]);
});

test('a failed call frees its slot too', async () => {
  const turns = createTenantTurns(1);
  await assert.rejects(turns.run('a', async () => Promise.reject(new Error('trap'))), /trap/);
  assert.equal(await turns.run('b', async () => 'ran'), 'ran');
  assert.deepEqual([turns.active, turns.queued], [0, 0]);
});
