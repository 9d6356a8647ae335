// An org's simulations run at most SIMULATIONS_PER_ORG at once: one more is refused at once (429,
// Retry-After) without holding anything, other orgs are not counted against it, and a finished or
// failed simulation frees its slot.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SIMULATIONS_PER_ORG, SimulationSlots } from '../../runtime/actions/simulation-slots.ts';

test('past the org\'s running simulations the next is a 429; other orgs and finished slots are free', async () => {
  const slots = new SimulationSlots();
  const finish: Array<() => void> = [];
  const running = Array.from({ length: SIMULATIONS_PER_ORG }, () => slots.run('org-a', () => new Promise<string>((resolve) => finish.push(() => resolve('done')))));
  await assert.rejects(slots.run('org-a', async () => assert.fail('must not run')), (error: Error & { status?: number; code?: string; retryAfterMs?: number }) => {
    assert.deepEqual([error.status, error.code, error.retryAfterMs], [429, 'too_many_simulations', 1000]);
    return true;
  });
  assert.equal(await slots.run('org-b', async () => 'other org'), 'other org');
  finish.shift()!();
  assert.equal(await running[0], 'done');
  assert.equal(await slots.run('org-a', async () => 'after one finished'), 'after one finished');
  await assert.rejects(slots.run('org-a', async () => Promise.reject(new Error('guest trapped'))), /guest trapped/);
  assert.equal(await slots.run('org-a', async () => 'a failure frees its slot'), 'a failure frees its slot');
  for (const end of finish) end();
  await Promise.all(running);
});
