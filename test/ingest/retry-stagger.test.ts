// The moments told to an org's device sockets that its quota refused (retry-stagger.ts): a crowd of
// sockets sharing a quota, each coming back when told, is refused about once per message stored,
// not once per socket per token; and one client that ignores its hint cannot push the others'
// moments out. Simulated on a virtual clock against the real token bucket.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_STAGGER_MS, RetryStagger } from '../../runtime/ingest/retry-stagger.ts';
import { TokenBucket } from '../../runtime/token-bucket.ts';

interface Sender {
  /** Its next attempt, in clock ms. */
  due: number;
  left: number;
  stored: number;
  /** Ignores the hint: tries again 1 ms later. */
  readonly greedy: boolean;
}

type Hint = (sender: Sender, now: number, waitMs: number) => number;
/** The ms a sender is held before it may take a token (0: it may now). */
type Hold = (sender: Sender, now: number) => number;

/**
 * Runs `senders` against one bucket of `rate` a second until `untilMs` or all have sent; answers
 * refusals per stored and the longest hint. A sender `hold` holds is refused without a token taken;
 * a sender that waits comes back `lateMs` after its moment (the network's time).
 */
function simulate(senders: Sender[], rate: number, hint: Hint, untilMs = Infinity, hold: Hold = () => 0, lateMs = 0): { refusedPerStored: number; longestHint: number } {
  const bucket = new TokenBucket(rate, rate, 0);
  let refused = 0;
  let stored = 0;
  let longestHint = 0;
  for (;;) {
    let next: Sender | undefined;
    for (const sender of senders) if (sender.left > 0 && (next === undefined || sender.due < next.due)) next = sender;
    if (next === undefined || next.due > untilMs) break;
    const now = next.due;
    const heldMs = hold(next, now);
    const waitMs = heldMs > 0 ? heldMs : bucket.take(now);
    if (waitMs === 0) {
      stored += 1;
      next.stored += 1;
      next.left -= 1;
      continue;
    }
    refused += 1;
    const told = hint(next, now, waitMs);
    longestHint = Math.max(longestHint, told);
    next.due = now + (next.greedy ? 1 : told + lateMs);
  }
  return { refusedPerStored: refused / stored, longestHint };
}

const crowd = (count: number, each: number, greedy = 0): Sender[] =>
  Array.from({ length: count }, (_, i) => ({ due: 0, left: i < greedy ? Infinity : each, stored: 0, greedy: i < greedy }));

const RATE = 250;
const plain: Hint = (_sender, _now, waitMs) => waitMs;
const staggered = (): Hint => {
  const stagger = new RetryStagger();
  return (sender, now, waitMs) => stagger.hint('acct', sender, now, waitMs, 1000 / RATE).waitMs;
};

test('fifty sockets sharing 250 a second: told the plain wait they are refused ~20 times per message stored (47 measured over real sockets); told moments apart, about once', () => {
  const herd = simulate(crowd(50, 40), RATE, plain).refusedPerStored;
  assert.ok(herd > 10, `plain waits: ${herd.toFixed(1)} refusals per stored`);
  const spread = simulate(crowd(50, 40), RATE, staggered()).refusedPerStored;
  assert.ok(spread < 2, `moments apart: ${spread.toFixed(2)} refusals per stored`);
});

test('a client that ignores its hint (tries again every millisecond) does not push the others\' moments out: they store as much as with plain waits, told well under a second', () => {
  const polite = (senders: Sender[]): number => senders.filter((sender) => !sender.greedy).reduce((sum, sender) => sum + sender.stored, 0);
  const withPlain = crowd(50, 1000, 1);
  simulate(withPlain, RATE, plain, 20_000);
  const withStagger = crowd(50, 1000, 1);
  const { longestHint } = simulate(withStagger, RATE, staggered(), 20_000);
  assert.ok(polite(withStagger) >= polite(withPlain), `stored by the 49 that wait: ${polite(withStagger)} with moments apart, ${polite(withPlain)} with plain waits`);
  assert.ok(longestHint < 1000, `the longest hint: ${longestHint} ms (49 sockets one 4 ms token apart)`);
});

test('a client that ignores its hint takes every token the 49 that wait come back for a millisecond late (5,000 of 5,250); held to its moment, about what each of them stores', () => {
  const storedBy = (hold: boolean): { greedy: number; politeMean: number } => {
    const stagger = new RetryStagger();
    // The greedy one last: whoever is first at 0 stores the whole second of burst (stores take no time here).
    const senders = crowd(50, 1000, 1).reverse();
    const hint: Hint = (sender, now, waitMs) => stagger.hint('acct', sender, now, waitMs, 1000 / RATE).waitMs;
    simulate(senders, RATE, hint, 20_000, hold ? (sender, now) => stagger.waitLeft(sender, now) : undefined, 1);
    const polite = senders.filter((sender) => !sender.greedy);
    return { greedy: senders.find((sender) => sender.greedy)!.stored, politeMean: polite.reduce((sum, sender) => sum + sender.stored, 0) / polite.length };
  };
  const free = storedBy(false);
  assert.ok(free.greedy > 10 * free.politeMean, `not held: the greedy one stored ${free.greedy}, each of the others ${free.politeMean.toFixed(0)}`);
  const held = storedBy(true);
  assert.ok(held.greedy <= 1.2 * held.politeMean, `held: the greedy one stored ${held.greedy}, each of the others ${held.politeMean.toFixed(0)}`);
  assert.ok(held.politeMean > free.politeMean, 'the others store more');
});

test('waitLeft: the ms until a sender\'s moment while it is ahead; none once it passed, for a sender never told one, or when the clock was set back past the refusal that told it', () => {
  const stagger = new RetryStagger();
  const [a, b] = [{}, {}];
  stagger.hint('org', a, 1000, 4, 4);
  stagger.hint('org', b, 1000, 4, 4);
  assert.deepEqual([stagger.waitLeft(a, 1000), stagger.waitLeft(b, 1000), stagger.waitLeft(b, 1005)], [4, 8, 3]);
  assert.deepEqual([stagger.waitLeft(a, 1004), stagger.waitLeft({}, 1000), stagger.waitLeft(b, 999)], [0, 0, 0]);
  assert.deepEqual(stagger.hint('org', b, 1005, stagger.waitLeft(b, 1005), 4), { waitMs: 3, early: 1 }, 'refused for it: the same moment, counted early');
});

test('a socket\'s moment is its own until it passes; the org\'s timeline starts again once passed or when the slot changes (its rate did); orgs are apart; at most MAX_STAGGER_MS past the wait', () => {
  const stagger = new RetryStagger();
  const wait = (orgId: string, sender: object, now: number, waitMs: number, slotMs: number): number => stagger.hint(orgId, sender, now, waitMs, slotMs).waitMs;
  const [a, b, c] = [{}, {}, {}];
  assert.deepEqual([wait('org', a, 0, 4, 4), wait('org', b, 0, 4, 4), wait('org', a, 1, 3, 4)], [4, 8, 3]);
  assert.equal(wait('org', c, 1, 3, 4), 11, 'after the last moment given');
  assert.equal(wait('other', a, 1, 3, 4), 3, 'another org: its own timeline (a socket belongs to one org)');
  assert.equal(wait('org', {}, 1, 3, 100), 3, 'a new slot (the rate changed): the timeline starts again');
  assert.equal(wait('org', {}, 2000, 4, 4), 4, 'a timeline passed starts again');
  for (let i = 0; i < 5000; i += 1) wait('big', {}, 0, 10, 4);
  assert.equal(wait('big', {}, 0, 10, 4), 10 + MAX_STAGGER_MS, 'a crowd larger than the horizon: capped');
  stagger.forget('big');
  assert.equal(wait('big', {}, 0, 10, 4), 10);
});

test('refusals a sender gets before its moment are counted, from the one after the refusal that gave it; a new moment counts afresh', () => {
  const stagger = new RetryStagger();
  const sender = {};
  assert.deepEqual(stagger.hint('org', sender, 0, 4, 4), { waitMs: 4, early: 0 });
  assert.deepEqual([1, 2, 3].map((now) => stagger.hint('org', sender, now, 3, 4).early), [1, 2, 3]);
  assert.deepEqual(stagger.hint('org', sender, 4, 4, 4), { waitMs: 4, early: 0 }, 'back at its moment, refused again: a new moment');
});

test('a wall clock set back an hour leaves no socket told to wait an hour: a moment further ahead than any given is dropped, the timeline too', () => {
  const stagger = new RetryStagger();
  const [a, b] = [{}, {}];
  const T = 10_000_000;
  assert.deepEqual(stagger.hint('acct', a, T, 500, 100), { waitMs: 500, early: 0 });
  assert.deepEqual(stagger.hint('acct', b, T, 500, 100), { waitMs: 600, early: 0 });
  const back = T - 3_600_000;
  assert.deepEqual(stagger.hint('acct', a, back, 500, 100), { waitMs: 500, early: 0 }, 'a new moment, not the old one an hour ahead');
  assert.deepEqual(stagger.hint('acct', b, back, 500, 100), { waitMs: 600, early: 0 }, 'one slot after it: the old timeline is dropped too');
});
