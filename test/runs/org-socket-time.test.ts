// Past the process's total of webhook sockets, the room a closed socket frees goes to the waiting
// org that has used the least socket time. Found by a probe of 2026-12-06: with 3,000 orgs whose
// receivers held each socket 1-3 s, the orgs took turns one socket each, and an org whose receiver
// answered at once got one request through per round of them all (its requests 20 s apart, up to
// 79 s late). Here the share runs on an injected clock, in a simulation of the same load.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OrgSocketShare } from '../../runtime/runs/org-socket-share.ts';
import { OrgSocketTime, RETURN_CREDIT_MS } from '../../runtime/runs/org-socket-time.ts';

test('socket time accrues per open socket; an org that comes back starts a little below the use of the last org served, and is forgotten when idle', () => {
  let now = 0;
  const time = new OrgSocketTime(() => now);
  time.opened('acct-a');
  time.opened('acct-a');
  now = 100;
  assert.equal(time.usedMs('acct-a'), 200, 'two sockets for 100 ms');
  time.closed('acct-a');
  now = 150;
  assert.deepEqual([time.usedMs('acct-a'), time.open('acct-a')], [250, 1]);
  assert.equal(time.usedMs('acct-new'), 0, 'nothing served yet: a newcomer starts at 0');
  now = 5_000;
  time.served('acct-a');
  assert.equal(time.usedMs('acct-a'), 5_100);
  assert.equal(time.usedMs('acct-new'), 5_100 - RETURN_CREDIT_MS, 'a newcomer starts a little below the last org served, however long it was away');
  time.forgetIfIdle('acct-a');
  assert.equal(time.open('acct-a'), 1, 'kept while a socket is open');
  time.closed('acct-a');
  time.forgetIfIdle('acct-a');
  now = 9_000;
  assert.equal(time.usedMs('acct-a'), 5_100 - RETURN_CREDIT_MS, 'forgotten: it starts afresh');
});

/** A request of `org` that holds its socket `holdMs`, arriving at `at`; `started` once it has one. */
interface Sent {
  readonly org: string;
  readonly at: number;
  readonly holdMs: number;
  started?: number;
}

/**
 * Runs `requests` through a share of `total` sockets on a simulated clock: each takes a socket when
 * the share has room, or waits for one, and closes it `holdMs` later.
 */
function simulate(total: number, requests: Sent[]): void {
  let now = 0;
  const share = new OrgSocketShare(10, total, () => now);
  const events: Array<{ readonly at: number; readonly run: () => void }> = requests.map((sent) => ({ at: sent.at, run: () => send(sent) }));
  const start = (sent: Sent): void => {
    sent.started = now;
    share.opened(sent.org);
    events.push({ at: now + sent.holdMs, run: () => share.closed(sent.org) });
  };
  const send = (sent: Sent): void => {
    if (share.hasRoom(sent.org)) start(sent);
    else share.wait(sent.org, sent, () => true, () => start(sent));
  };
  while (events.length > 0) {
    events.sort((a, b) => a.at - b.at);
    const next = events.shift()!;
    now = next.at;
    next.run();
  }
}

test('past the total, an org whose receiver answers at once is not held a round behind orgs whose receivers hold their sockets for seconds', () => {
  // 50 busy orgs, 4 requests each, each holding its socket 2 s, through 5 sockets: one round of
  // them all takes 20 s. A quiet org sends a request every 50 ms from t = 30 s (every busy org has
  // had a socket by then), each done in 2 ms.
  const busy: Sent[] = [];
  for (let round = 0; round < 4; round += 1) for (let org = 0; org < 50; org += 1) busy.push({ org: `acct-busy-${org}`, at: 0, holdMs: 2_000 });
  const quiet: Sent[] = Array.from({ length: 20 }, (_, i) => ({ org: 'acct-quiet', at: 30_000 + i * 50, holdMs: 2 }));
  simulate(5, [...busy, ...quiet]);

  assert.ok([...busy, ...quiet].every((sent) => sent.started !== undefined), 'every request got a socket');
  const quietWaits = quiet.map((sent) => sent.started! - sent.at);
  // A socket frees every 400 ms on average: the quiet org waits for about one, not for a round (20 s).
  assert.ok(Math.max(...quietWaits) <= 2_000, `the quiet org waited at most one busy request's hold: ${quietWaits.join(', ')} ms`);
  // The busy orgs still take turns among themselves: each one's last request starts in the last round.
  const lastStarts = new Map<string, number>();
  for (const sent of busy) lastStarts.set(sent.org, Math.max(lastStarts.get(sent.org) ?? 0, sent.started!));
  const earliestLast = Math.min(...lastStarts.values());
  assert.ok(earliestLast >= 3 * 20_000 - 2_000, `no busy org finished a round early: the earliest last start was ${earliestLast} ms`);
});
