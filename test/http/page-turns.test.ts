// What a page read is admitted with: the size its same request answered last, remembered per org,
// so that one org's many requests push out only its own.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { PageTurns } from '../../runtime/http/page-turns.ts';
import { countTurns } from '../helpers/loop-turns.ts';

/** The size `turns` admits `tenant`'s `request` with. */
async function admittedWith(turns: PageTurns, tenant: string, request: string): Promise<number> {
  let told = -1;
  await turns.run(tenant, request, (chars) => (told = chars), () => undefined);
  return told;
}

test('an org\'s many requests push out only its own remembered sizes, its oldest first', async () => {
  const turns = new PageTurns();
  turns.answered('org-b', '/organizations/org-b/export?', 16 * 1024 * 1024);
  turns.answered('org-a', '/organizations/org-a/events?limit=500', 9_000_000);
  for (let i = 0; i < 10_000; i++) turns.answered('org-a', `/organizations/org-a/workflows?limit=${String(5).padStart(i % 4 + 1, '0')}&n=${i}`, 12);
  assert.equal(await admittedWith(turns, 'org-b', '/organizations/org-b/export?'), 16 * 1024 * 1024, 'another org\'s is kept');
  assert.equal(await admittedWith(turns, 'org-a', '/organizations/org-a/events?limit=500'), 0, 'the org\'s own oldest went');
  assert.equal(await admittedWith(turns, 'org-a', '/organizations/org-a/workflows?limit=0005&n=9999'), 12, 'its newest is kept');
});

test('a request is remembered by a digest, not as sent: 1,000 orgs\' 16 cursors of 6 KB hold a few MB, not 96; a deleted org\'s are forgotten', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const turns = new PageTurns();
  // Read from the network, each is a string of its own (a repeated literal here would be shared).
  const long = (i: number) => `/organizations/org-c/events?cursor=${Buffer.alloc(6_000, '%20').toString('latin1')}${i}`;
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let org = 0; org < 1_000; org++) for (let i = 0; i < 16; i++) turns.answered(`org-${org}`, long(i), 100 + i);
  gc();
  const held = process.memoryUsage().heapUsed - before;
  assert.ok(held < 16 * 1024 * 1024, `${held} bytes held`);
  assert.equal(await admittedWith(turns, 'org-7', long(15)), 115, 'found by its digest');
  turns.answered('org-7', long(16), 116);
  assert.equal(await admittedWith(turns, 'org-7', long(0)), 0, 'past 16 an org\'s oldest go');
  assert.equal(await admittedWith(turns, 'org-7', long(1)), 101);
  turns.forget('org-7');
  assert.equal(await admittedWith(turns, 'org-7', long(15)), 0, 'forgotten with its org');
  assert.equal(await admittedWith(turns, 'org-8', long(15)), 115, 'others kept');
});

const busyFor = (ms: number): void => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

test('builds of every org share the turns: slow ones one a turn, quick ones together, an org\'s own one after another', async () => {
  const turns = new PageTurns();
  const counter = countTurns();
  const turn = counter.count;
  try {
    // Asked in one turn, as requests read together are: each slow build lets the loop turn before the next.
    const slow = await Promise.all(['org-a', 'org-b', 'org-c'].map((org) => turns.run(org, '/export', () => undefined, () => (busyFor(20), turn()))));
    assert.equal(new Set(slow).size, 3, `slow builds in turns ${slow.join(', ')}`);
    const quick = await Promise.all(Array.from({ length: 20 }, (_, i) => turns.run(`org-${i}`, '/events', () => undefined, () => turn())));
    assert.equal(new Set(quick).size, 1, `quick builds of twenty orgs in turns ${quick.join(', ')}`);
    const own = await Promise.all(Array.from({ length: 4 }, () => turns.run('org-d', '/events', () => undefined, () => turn())));
    assert.equal(new Set(own).size, 4, `one org's builds in turns ${own.join(', ')}`);
  } finally {
    counter.stop();
  }
});

test('a refusal or a failed build answers only its own request; the next build runs', async () => {
  const turns = new PageTurns();
  const refused = turns.run('org-e', '/export', () => {
    throw new Error('no room');
  }, () => 'built');
  const failed = turns.run('org-f', '/export', () => undefined, () => Promise.reject(new Error('failed')));
  const next = turns.run('org-e', '/export', () => undefined, () => 'built');
  await assert.rejects(refused, /no room/);
  await assert.rejects(failed, /failed/);
  assert.equal(await next, 'built');
});
