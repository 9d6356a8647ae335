// What a page read is admitted with: the size its same request answered last, remembered per org,
// so that one org's many requests push out only its own.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PageTurns } from '../../runtime/http/page-turns.ts';

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
