// Replay pages take turns: at most REPLAY_PAGES_PER_TURN pages that read the log run per event-loop
// turn, and no more once REPLAY_TURN_MS passed (one at least), orgs one after another, so one org's
// thousands of replays cannot hold every request up or run ahead of another org's replay.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { REPLAY_PAGES_PER_TURN, REPLAY_TURN_MS, ReplayTurns } from '../../runtime/rooms/replay-turns.ts';

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('a turn runs at most REPLAY_PAGES_PER_TURN pages, one org after another, each org in its own order', async () => {
  // Pages that take no time: only the count ends a turn.
  const turns = new ReplayTurns({ now: () => 0 });
  const ran: string[] = [];
  const page = (name: string) => () => (ran.push(name), true);
  for (let i = 0; i < 20; i++) turns.add('acct-a', page(`a${i}`));
  turns.add('acct-b', page('b0'));
  turns.add('acct-b', page('b1'));
  turns.add('acct-c', page('c0'));
  assert.deepEqual(ran, [], 'nothing runs in the turn that queued it');
  await nextTurn();
  assert.equal(REPLAY_PAGES_PER_TURN, 8);
  assert.deepEqual(ran, ['a0', 'b0', 'c0', 'a1', 'b1', 'a2', 'a3', 'a4'], "the other orgs' pages ran in the first turn, between the busy org's");
  assert.equal(turns.waiting, 15);
  await nextTurn();
  assert.deepEqual(ran.slice(8), ['a5', 'a6', 'a7', 'a8', 'a9', 'a10', 'a11', 'a12']);
  await nextTurn();
  await nextTurn();
  assert.equal(ran.length, 23);
  assert.equal(turns.waiting, 0);
});

test("pages that read nothing (an ended replay's) do not count against the turn; a page queued by a page waits behind the other orgs", async () => {
  const turns = new ReplayTurns({ pagesPerTurn: 3, now: () => 0 });
  const ran: string[] = [];
  for (let i = 0; i < 5; i++) turns.add('acct-a', () => (ran.push(`ended${i}`), false));
  turns.add('acct-a', () => {
    ran.push('a-first');
    turns.add('acct-a', () => (ran.push('a-next'), true));
    return true;
  });
  turns.add('acct-b', () => (ran.push('b0'), true));
  turns.add('acct-b', () => (ran.push('b1'), true));
  await nextTurn();
  assert.deepEqual(ran, ['ended0', 'b0', 'ended1', 'b1', 'ended2', 'ended3', 'ended4', 'a-first'], 'three pages read: b0, b1, a-first');
  await nextTurn();
  assert.deepEqual(ran.slice(8), ['a-next']);
});

test(`a turn ends once REPLAY_TURN_MS of work is done, after one page at least: a slow page holds the loop for itself alone`, async () => {
  let now = 0;
  const turns = new ReplayTurns({ now: () => now });
  const ran: string[] = [];
  // a's pages take 0.8 ms each, b's first 50 ms.
  for (let i = 0; i < 6; i++) turns.add('acct-a', () => ((now += 0.8), ran.push(`a${i}`), true));
  turns.add('acct-b', () => ((now += 50), ran.push('b-slow'), true));
  turns.add('acct-b', () => ((now += 0.1), ran.push('b-next'), true));
  assert.equal(REPLAY_TURN_MS, 2);
  await nextTurn();
  assert.deepEqual(ran, ['a0', 'b-slow'], 'the slow page ended the turn');
  await nextTurn();
  assert.deepEqual(ran.slice(2), ['a1', 'b-next', 'a2', 'a3'], '0.8 + 0.1 + 0.8 ms: under 2; the fourth page ends it');
  await nextTurn();
  assert.deepEqual(ran.slice(6), ['a4', 'a5']);
  assert.equal(turns.waiting, 0);
});
