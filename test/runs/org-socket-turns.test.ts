// Past the process's total of webhook sockets, the room a closed socket frees goes to the waiting
// org that has used the least socket time lately (org-socket-turns.ts). Found by a probe of 2026-12-06: with 3,000
// orgs whose receivers held each socket 1-3 s, turns counted in sockets let an org whose receiver
// answered at once through once per round of them all (20 s apart, up to 79 s late). A first fix
// (least socket time used, idle orgs forgotten) was reverted after review: an org with a backlog
// got no socket for 600 s behind orgs sending one request at a time, and an org that came could start
// a thousand seconds behind. Here the share runs on a simulated clock, through each of those loads.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OrgSocketShare } from '../../runtime/runs/org-socket-share.ts';
import { OrgSocketTurns, USE_HALF_LIFE_MS } from '../../runtime/runs/org-socket-turns.ts';

test("an org's use is the time its sockets were open, halving every minute; forgotten only once it has decayed, or when no org waits", () => {
  const turns = new OrgSocketTurns();
  turns.opened('acct-a', 0);
  turns.opened('acct-a', 0);
  assert.ok(Math.abs(turns.usedMs('acct-a', 100) - 200) < 0.5, 'two sockets for 100 ms: about 200 ms');
  turns.closed('acct-a', 100);
  turns.closed('acct-a', 100);
  const then = turns.usedMs('acct-a', 100);
  assert.ok(Math.abs(turns.usedMs('acct-a', 100 + USE_HALF_LIFE_MS) - then / 2) < 0.01, 'half of it a minute later');
  assert.equal(turns.usedMs('acct-new', 100), 0, 'an org never seen has used nothing');
  turns.forgetIfIdle('acct-a', 100 + USE_HALF_LIFE_MS);
  assert.ok(turns.usedMs('acct-a', 100 + USE_HALF_LIFE_MS) > 0, 'kept while its use counts');
  turns.forgetIfIdle('acct-a', 100 + 10 * USE_HALF_LIFE_MS);
  assert.equal(turns.usedMs('acct-a', 100 + 10 * USE_HALF_LIFE_MS), 0, 'forgotten once decayed below a millisecond');
  turns.opened('acct-b', 0);
  turns.opened('acct-c', 0);
  turns.closed('acct-c', 50);
  turns.forgetAllIdle();
  assert.deepEqual([turns.open('acct-b'), turns.usedMs('acct-c', 50)], [1, 0], 'no org waits: the idle are forgotten, those holding a socket kept');
});

/** A request of `org` that holds its socket `holdMs`, arriving at `at`; `next`: the request its org sends once it is done, if any. */
interface Sent {
  readonly org: string;
  readonly at: number;
  readonly holdMs: number;
  readonly next?: (doneAt: number) => Sent | undefined;
  started?: number;
}

/**
 * Runs `requests` (and those they send next) through a share of `total` sockets, 10 per org, on a
 * simulated clock until `untilMs`: each takes a socket when the share has room, or waits for one,
 * and closes it `holdMs` later. Returns every request sent.
 */
function simulate(total: number, requests: Sent[], untilMs = Number.POSITIVE_INFINITY): Sent[] {
  let now = 0;
  const share = new OrgSocketShare(10, total, () => now);
  const sent: Sent[] = [];
  const events: Array<{ readonly at: number; readonly run: () => void }> = [];
  const arrive = (request: Sent): void => {
    sent.push(request);
    events.push({ at: request.at, run: () => (share.hasRoom(request.org) ? start(request) : share.wait(request.org, request, () => true, () => start(request))) });
  };
  const start = (request: Sent): void => {
    request.started = now;
    share.opened(request.org);
    events.push({
      at: now + request.holdMs,
      run: () => {
        share.closed(request.org);
        const next = request.next?.(now);
        if (next !== undefined) arrive(next);
      },
    });
  };
  for (const request of requests) arrive(request);
  while (events.length > 0) {
    events.sort((a, b) => a.at - b.at);
    const event = events.shift()!;
    if (event.at > untilMs) break;
    now = event.at;
    event.run();
  }
  return sent;
}

const waits = (requests: Sent[]): number[] => requests.map((request) => (request.started ?? Number.POSITIVE_INFINITY) - request.at);

test('an org whose receiver answers at once waits about one socket for each request, not a round of the orgs whose receivers hold theirs for seconds', () => {
  // 50 busy orgs, 4 requests each holding its socket 2 s, through 5 sockets: a round of them all
  // takes 20 s. A quiet org sends a request every 50 ms from t = 30 s, each done in 2 ms.
  const busy: Sent[] = [];
  for (let round = 0; round < 4; round += 1) for (let org = 0; org < 50; org += 1) busy.push({ org: `acct-busy-${org}`, at: 0, holdMs: 2_000 });
  const quiet: Sent[] = Array.from({ length: 20 }, (_, i) => ({ org: 'acct-quiet', at: 30_000 + i * 50, holdMs: 2 }));
  simulate(5, [...busy, ...quiet]);

  assert.ok([...busy, ...quiet].every((request) => request.started !== undefined), 'every request got a socket');
  // A socket frees every 400 ms on average.
  assert.ok(Math.max(...waits(quiet)) <= 2_000, `the quiet org waited at most one busy request's hold: ${waits(quiet).join(', ')} ms`);
  // The busy orgs share among themselves: none gets all four through before every other org had two,
  // and all are done when a plain round of them would be (80 s).
  const lastStarts = new Map<string, number>();
  for (const request of busy) lastStarts.set(request.org, Math.max(lastStarts.get(request.org) ?? 0, request.started!));
  const spread = [...lastStarts.values()].sort((a, b) => a - b);
  assert.ok(spread[0]! >= 2 * 20_000 && spread.at(-1)! <= 4 * 20_000, `the busy orgs' last starts: ${spread.join(', ')} ms`);
});

test('an org with a backlog gets its share beside orgs that send one request at a time, and is not passed by them for good', () => {
  // Ten orgs each send a 2 s request and, 1 ms after it is done, the next, for 10 minutes; one org
  // queues 20 requests of 2 s at the start. 11 orgs on 5 sockets: the backlog's share is 5/11.
  const resend = (org: string) => (doneAt: number): Sent | undefined => (doneAt < 600_000 ? { org, at: doneAt + 1, holdMs: 2_000, next: resend(org) } : undefined);
  const steady: Sent[] = Array.from({ length: 10 }, (_, i) => ({ org: `acct-steady-${i}`, at: 0, holdMs: 2_000, next: resend(`acct-steady-${i}`) }));
  const backlog: Sent[] = Array.from({ length: 20 }, () => ({ org: 'acct-backlog', at: 0, holdMs: 2_000 }));
  simulate(5, [...steady, ...backlog], 700_000);

  const lastStart = Math.max(...backlog.map((request) => request.started ?? Number.POSITIVE_INFINITY));
  // 20 requests x 2 s = 40 socket-seconds at a fair 5/11 of a socket: about 88 s (turns in sockets: 78 s).
  assert.ok(lastStart <= 120_000, `the backlog's last request started at ${lastStart} ms`);
});

test('an org that held sockets for a long time is passed by the others, and a quick org still waits only for one socket', () => {
  // One org holds 5 sockets for 1,000 s, then 4 more for another 1,000 s (given room as its first
  // five close); two orgs then queue 2 s requests, and a quiet one sends 2 ms requests every 100 ms.
  const long: Sent[] = Array.from({ length: 9 }, () => ({ org: 'acct-long', at: 0, holdMs: 1_000_000 }));
  const queued: Sent[] = [];
  for (const org of ['acct-a', 'acct-b']) for (let i = 0; i < 50; i += 1) queued.push({ org, at: 1_000_100, holdMs: 2_000 });
  const quiet: Sent[] = Array.from({ length: 20 }, (_, i) => ({ org: 'acct-quiet', at: 1_010_000 + i * 100, holdMs: 2 }));
  simulate(5, [...long, ...queued, ...quiet]);

  assert.ok(Math.max(...waits(quiet)) <= 2_000, `the quiet org waited at most one 2 s hold of the one socket left: ${waits(quiet).join(', ')} ms`);
  assert.ok([...long, ...queued, ...quiet].every((request) => request.started !== undefined), 'every request got a socket');
});
