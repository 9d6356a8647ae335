// A wall clock set forward while the runtime runs neither prunes a dedup claim early nor takes one
// for expired (prune-time.ts): ages are measured on a clock never ahead of the monotonic time since
// the start. Before, a jump past the dedup window pruned a delivery's claim, and once the clock came
// back the same delivery, its signature still fresh, was taken again (a second event, its runs and
// effects twice); sent during the jump, it was taken again at once. A claim written while the clock
// was set back is dated never behind the time passed since the start (before, dated by the set back,
// it was expired once the clock was put right). Time that truly passes still prunes.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { SettableClock } from '../helpers/settable-clock.ts';

const ORG = 'acct-clock-jump';
const WINDOW_MS = 601_000;
const SECRET = newStandardSecret();

const clock = new SettableClock(Date.UTC(2026, 11, 6, 12, 0, 0));
let rt: TestRuntime;

before(async () => {
  rt = await startRuntime({ clock, args: ['--dedup-window-ms', String(WINDOW_MS)] });
  const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'shop', secrets: [SECRET] } })).status, 201);
});
after(() => rt.close());

const deliver = (id: string) => {
  const body = JSON.stringify({ type: 'order.paid', id });
  return call(rt.url, 'POST', `/hooks/${ORG}/shop`, { body, headers: signStandard(SECRET, id, Math.floor(clock.now() / 1000), body) });
};

test('a prune while the wall clock is an hour ahead keeps the claims; the delivery sent again once it is back is a 409', async () => {
  assert.equal((await deliver('msg-jump')).status, 204);
  clock.wall += 60 * 60_000;
  await rt.runtime.prune();
  clock.wall -= 60 * 60_000;
  const again = await deliver('msg-jump');
  assert.equal(again.status, 409, again.text);
});

test('while the wall clock stays an hour ahead, the delivery sent again (signed by that clock) is a 409', async () => {
  assert.equal((await deliver('msg-ahead')).status, 204);
  clock.wall += 60 * 60_000;
  try {
    const again = await deliver('msg-ahead');
    assert.equal(again.status, 409, again.text);
  } finally {
    clock.wall -= 60 * 60_000;
  }
});

test('a delivery taken while the wall clock was set back past the window, sent again once it is right, is a 409, before and after a prune', async () => {
  // The sender's clock reads as the runtime's here; a device or an API caller signs no time at all.
  clock.wall -= 60 * 60_000;
  try {
    assert.equal((await deliver('msg-behind')).status, 204);
  } finally {
    clock.wall += 60 * 60_000;
  }
  const again = await deliver('msg-behind');
  assert.equal(again.status, 409, again.text);
  await rt.runtime.prune();
  const afterPrune = await deliver('msg-behind');
  assert.equal(afterPrune.status, 409, afterPrune.text);
});

test('once the window has truly passed, the prune lets the claim go and the id is taken again', async () => {
  assert.equal((await deliver('msg-passed')).status, 204);
  clock.advance(WINDOW_MS + 1);
  await rt.runtime.prune();
  assert.equal(rt.runtime.inbox.storedClaim(ORG, 'shop', 'msg-passed'), undefined, 'pruned');
  assert.equal((await deliver('msg-passed')).status, 204);
});
