// The amortised sweep (growth-sweep.ts): nothing is walked below the mark; at it the stale entries
// go, and the next mark is twice what is left (never below the first).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FIRST_SWEEP_AT, growthSweep } from '../runtime/growth-sweep.ts';

test('a map is swept of its stale entries only once it reaches its mark, then at twice what is left', () => {
  const map = new Map<number, boolean>();
  const sweep = growthSweep(map);
  let asked = 0;
  const staleIfFalse = (live: boolean): boolean => (asked++, !live);
  for (let i = 0; i < FIRST_SWEEP_AT - 1; i++) map.set(i, i % 2 === 0);
  sweep(staleIfFalse);
  assert.equal(asked, 0, 'below the mark: not walked');
  assert.equal(map.size, FIRST_SWEEP_AT - 1);
  map.set(FIRST_SWEEP_AT - 1, true);
  sweep(staleIfFalse);
  assert.equal(asked, FIRST_SWEEP_AT, 'at the mark: each entry looked at once');
  assert.equal(map.size, FIRST_SWEEP_AT / 2 + 1, 'the stale half gone');
  // The next mark is twice what was left: 1,026.
  for (let i = 0; map.size < 2 * (FIRST_SWEEP_AT / 2 + 1) - 1; i++) map.set(10_000 + i, true);
  asked = 0;
  sweep(staleIfFalse);
  assert.equal(asked, 0, 'one below the new mark');
  map.set(-1, true);
  sweep(staleIfFalse);
  assert.equal(asked, 2 * (FIRST_SWEEP_AT / 2 + 1), 'at it');
});
