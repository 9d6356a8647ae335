// Work asked for org by org and done one pass at a time (org-passes.ts): the orgs that ask while a
// pass runs go together in the next, an org asked for twice is worked on once and both askers get
// its answer, and a pass that fails fails its askers only.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OrgPasses } from '../../runtime/tenancy/org-passes.ts';

/** A pass held open until released, answering each org's id upper-cased (or failing). */
function heldPasses() {
  const passes: string[][] = [];
  const releases: Array<(failure?: Error) => void> = [];
  const work = new OrgPasses<string>((orgIds) => {
    passes.push([...orgIds]);
    return new Promise((resolve, reject) => {
      releases.push((failure) => (failure === undefined ? resolve(new Map(orgIds.filter((id) => id !== 'silent').map((id) => [id, id.toUpperCase()]))) : reject(failure)));
    });
  });
  /** Lets the running pass end, then waits until the next one (if any) has started. */
  const release = async (failure?: Error): Promise<void> => {
    releases.shift()!(failure);
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { work, passes, release };
}

test('orgs that ask while a pass runs go together in the next one, each told its own answer', async () => {
  const { work, passes, release } = heldPasses();
  const first = work.run('a');
  const waiting = [work.run('b'), work.run('c'), work.run('b'), work.run('a')];
  assert.deepEqual(passes, [['a']], 'one pass at a time');
  await release();
  assert.equal(await first, 'A');
  assert.deepEqual(passes, [['a'], ['b', 'c', 'a']], 'b asked for twice is worked on once; a, asked for again while its pass ran, in the next');
  await release();
  assert.deepEqual(await Promise.all(waiting), ['B', 'C', 'B', 'A']);
  // Idle again: the next asker starts a pass of its own at once.
  const later = work.run('d');
  assert.deepEqual(passes.at(-1), ['d']);
  await release();
  assert.equal(await later, 'D');
});

test('a pass that fails fails its own askers, and the next pass goes on', async () => {
  const { work, passes, release } = heldPasses();
  const failing = assert.rejects(work.run('a'), /disk full/);
  const next = work.run('b');
  await release(new Error('disk full'));
  await failing;
  assert.deepEqual(passes, [['a'], ['b']]);
  await release();
  assert.equal(await next, 'B');
});

test('an org the work gave no answer for is refused, not answered undefined', async () => {
  const { work, release } = heldPasses();
  const silent = assert.rejects(work.run('silent'), /no answer for organization silent/);
  await release();
  await silent;
});
