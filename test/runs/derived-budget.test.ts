// The derived-event budget for steps in flight together: a place counts until its event is stored
// (not until the flush that follows: counted twice meanwhile, a valid step was refused), a step
// whose event is stored already needs none, and a place let go frees the room.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DerivedBudget } from '../../runtime/runs/derived-budget.ts';

test('places count until their events are stored, then the count on disk has them', () => {
  let derived = 998;
  const stored = new Set<string>();
  const budget = new DerivedBudget(1000, { derivedSoFar: () => derived, eventStored: (_org, id) => stored.has(id) });
  const a = budget.hold('org', 'root', 'evt_a');
  const b = budget.hold('org', 'root', 'evt_b');
  const c = budget.hold('org', 'root', 'evt_c');
  assert.equal(a.take(), true);
  assert.equal(b.take(), true, 'the last place');
  assert.equal(c.take(), false, '998 stored + 2 in flight');
  // A commits: its event and the count are visible, its flush still under way (a not released yet).
  stored.add('evt_a');
  derived = 999;
  assert.equal(c.take(), false, 'b still holds the last place');
  b.release(); // b's step failed to be written
  assert.equal(c.take(), true, 'a counted once (on disk), not twice');
  a.release();
  assert.equal(budget.hold('org', 'root', 'evt_d').take(), false, '999 + c');
  assert.equal(budget.hold('org', 'other-root', 'evt_e').take(), true, 'another root has its own budget');
});

test('a step whose derived event is stored already (it ran before a crash) takes no place and is never refused', () => {
  const budget = new DerivedBudget(1000, { derivedSoFar: () => 1000, eventStored: (_org, id) => id === 'evt_done' });
  assert.equal(budget.hold('org', 'root', 'evt_done').take(), true);
  assert.equal(budget.hold('org', 'root', 'evt_new').take(), false);
});
