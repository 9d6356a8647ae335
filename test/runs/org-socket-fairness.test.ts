// Past the process's total of webhook sockets, the room a closed socket frees goes by fair queuing
// over socket time (org-socket-turns.ts). Found by a probe of 2026-12-06: with 3,000 orgs whose
// receivers held each socket 1-3 s, turns counted in sockets let an org whose receiver answered at
// once through once per round of them all (20 s apart, up to 79 s late). Two tries were reverted
// after review; the loads that broke them are here too: an org with a backlog beside orgs sending
// one request at a time (passed forever), and an org that filled its share while nothing waited
// (starved ~10 minutes once others came). The share runs on the simulation's clock.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OrgSocketShare } from '../../runtime/runs/org-socket-share.ts';

/** A request of `org` that holds its socket `holdMs`, arriving at `at`; `next`: the request its org sends once it is done, if any. */
interface Sent {
  readonly org: string;
  readonly at: number;
  readonly holdMs: number;
  readonly next?: (doneAt: number) => Sent | undefined;
  started?: number;
}

/**
 * Runs `requests` (and those they send next) through a share of `total` sockets, `perOrg` per org,
 * on a simulated clock until `untilMs`: each takes a socket when the share has room, or waits for
 * one, and closes it `holdMs` later. Returns every request sent.
 */
function simulate(total: number, requests: Sent[], untilMs = Number.POSITIVE_INFINITY, perOrg = 10, share?: (made: OrgSocketShare) => void): Sent[] {
  let now = 0;
  const made = new OrgSocketShare(perOrg, total, () => now);
  share?.(made);
  const shared = made;
  const sent: Sent[] = [];
  const events: Array<{ readonly at: number; readonly run: () => void }> = [];
  const arrive = (request: Sent): void => {
    sent.push(request);
    events.push({ at: request.at, run: () => (shared.hasRoom(request.org) ? start(request) : shared.wait(request.org, request, () => true, () => start(request))) });
  };
  const start = (request: Sent): void => {
    request.started = now;
    const openedAt = shared.opened(request.org);
    events.push({
      at: now + request.holdMs,
      run: () => {
        shared.closed(request.org, openedAt);
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

/** `org` sends a request holding `holdMs` from `at`, and the next 1 ms after each is done, until `untilMs`. */
function stream(org: string, at: number, holdMs: number, untilMs: number): Sent {
  const next = (doneAt: number): Sent | undefined => (doneAt < untilMs ? { org, at: doneAt + 1, holdMs, next } : undefined);
  return { org, at, holdMs, next };
}

const waits = (requests: Sent[]): number[] => requests.map((request) => (request.started ?? Number.POSITIVE_INFINITY) - request.at);

test('an org whose receiver answers at once waits about one socket per request, not a round of the orgs whose receivers hold theirs for seconds', () => {
  // 50 busy orgs, 4 requests each holding its socket exactly 2 s (as many receivers timing out
  // alike would), through 5 sockets: a round takes 20 s. A quiet org sends a request every 50 ms
  // from t = 30 s, each done in 2 ms.
  const busy: Sent[] = [];
  for (let round = 0; round < 4; round += 1) for (let org = 0; org < 50; org += 1) busy.push({ org: `acct-busy-${org}`, at: 0, holdMs: 2_000 });
  const quiet: Sent[] = Array.from({ length: 20 }, (_, i) => ({ org: 'acct-quiet', at: 30_000 + i * 50, holdMs: 2 }));
  simulate(5, [...busy, ...quiet]);

  assert.ok([...busy, ...quiet].every((request) => request.started !== undefined), 'every request got a socket');
  // A socket frees every 400 ms on average.
  assert.ok(Math.max(...waits(quiet)) <= 2_000, `the quiet org waited at most one busy request's hold: ${waits(quiet).join(', ')} ms`);
  const lastStarts = new Map<string, number>();
  for (const request of busy) lastStarts.set(request.org, Math.max(lastStarts.get(request.org) ?? 0, request.started!));
  const spread = [...lastStarts.values()].sort((a, b) => a - b);
  assert.ok(spread[0]! >= 2 * 20_000 && spread.at(-1)! <= 4 * 20_000, `the busy orgs share among themselves: their last starts ${spread.join(', ')} ms`);
});

test('a quick org, once it has had a socket, is not held behind busy orgs that keep coming for the first time', () => {
  // Busy orgs keep arriving, a new one every 100 ms with three requests of 1-2 s, through 5 sockets.
  // The quick org's first request takes its turn among the first requests of the orgs that came
  // before it (no org's first request is known to be quick); each one after waits about one socket.
  const busy: Sent[] = [];
  for (let i = 0; i < 300; i += 1) for (let r = 0; r < 3; r += 1) busy.push({ org: `acct-new-${i}`, at: i * 100, holdMs: 1_000 + (i % 3) * 500 });
  const quiet: Sent[] = Array.from({ length: 40 }, (_, i) => ({ org: 'acct-quiet', at: 5_000 + i * 500, holdMs: 2 }));
  simulate(5, [...busy, ...quiet]);
  const firstServed = quiet[0]!.started!;
  assert.ok(firstServed - quiet[0]!.at <= 20_000, `the first waited ${firstServed - quiet[0]!.at} ms`);
  const after = quiet.filter((request) => request.at > firstServed);
  assert.ok(after.length >= 10 && Math.max(...waits(after)) <= 2_000, `the quiet org's waits after its first: ${waits(after).join(', ')} ms`);
});

test('an org with a backlog gets its share beside orgs that send one request at a time, and is not passed by them for good', () => {
  // Ten orgs each send a 2 s request and, 1 ms after it is done, the next, for 10 minutes; one org
  // queues 20 requests of 2 s at the start. 11 orgs on 5 sockets: the backlog's share is 5/11.
  const steady = Array.from({ length: 10 }, (_, i) => stream(`acct-steady-${i}`, 0, 2_000, 600_000));
  const backlog: Sent[] = Array.from({ length: 20 }, () => ({ org: 'acct-backlog', at: 0, holdMs: 2_000 }));
  simulate(5, [...steady, ...backlog], 700_000);

  const lastStart = Math.max(...backlog.map((request) => request.started ?? Number.POSITIVE_INFINITY));
  // 20 requests x 2 s = 40 socket-seconds at a fair 5/11 of a socket: about 88 s (turns in sockets: 78 s).
  assert.ok(lastStart <= 120_000, `the backlog's last request started at ${lastStart} ms`);
});

test('an org that filled its share while nothing waited is not shut out once others come', () => {
  // One org keeps 10 streams of 2 s requests on 20 sockets alone for 10 minutes; then 30 orgs come
  // with 2 streams each: 31 orgs want 70 sockets of 20.
  const heavy = Array.from({ length: 10 }, () => stream('acct-heavy', 0, 2_000, 900_000));
  const others = Array.from({ length: 30 }, (_, i) => [stream(`acct-other-${i}`, 600_000, 2_000, 900_000), stream(`acct-other-${i}`, 600_000, 2_000, 900_000)]).flat();
  const sent = simulate(20, [...heavy, ...others], 900_000);

  // 31 orgs on 20 sockets: a fair share is 20/31 of a socket each, about 84 requests of 2 s in the
  // 260 s after they came; the heavy org gets its share, never shut out for long.
  const heavyStarts = sent.filter((request) => request.org === 'acct-heavy' && request.started !== undefined && request.started >= 620_000 && request.started < 880_000).map((request) => request.started!);
  const longestGap = Math.max(...heavyStarts.slice(1).map((at, i) => at - heavyStarts[i]!));
  assert.ok(heavyStarts.length >= 40 && longestGap <= 20_000, `the heavy org started ${heavyStarts.length} requests from 620 s to 880 s, at most ${longestGap} ms apart`);
  const othersAfter = sent.filter((request) => request.org !== 'acct-heavy' && request.at < 880_000);
  assert.ok(Math.max(...waits(othersAfter)) <= 10_000, `the others' waits: at most ${Math.max(...waits(othersAfter))} ms`);
});

test('an org that held sockets for a long time is passed by the others, and a quick org still waits only for about one socket', () => {
  // One org holds 5 sockets for 1,000 s, then 4 more for another 1,000 s (given room as its first
  // five close); two orgs then queue 2 s requests, and a quiet one sends 2 ms requests every 100 ms.
  const long: Sent[] = Array.from({ length: 9 }, () => ({ org: 'acct-long', at: 0, holdMs: 1_000_000 }));
  const queued: Sent[] = [];
  for (const org of ['acct-a', 'acct-b']) for (let i = 0; i < 50; i += 1) queued.push({ org, at: 1_000_100, holdMs: 2_000 });
  const quiet: Sent[] = Array.from({ length: 20 }, (_, i) => ({ org: 'acct-quiet', at: 1_010_000 + i * 100, holdMs: 2 }));
  simulate(5, [...long, ...queued, ...quiet]);

  assert.ok(Math.max(...waits(quiet)) <= 4_000, `the quiet org's waits on the one socket left: ${waits(quiet).join(', ')} ms`);
  assert.ok([...long, ...queued, ...quiet].every((request) => request.started !== undefined), 'every request got a socket');
});

test('an org that comes with a large backlog takes no more than its turn from the orgs already waiting', () => {
  // 20 orgs keep one stream of 2 s requests each on 10 sockets; at 60 s an org comes with 1,000 requests.
  const steady = Array.from({ length: 20 }, (_, i) => stream(`acct-steady-${i}`, 0, 2_000, 300_000));
  const flood: Sent[] = Array.from({ length: 1_000 }, () => ({ org: 'acct-flood', at: 60_000, holdMs: 2_000 }));
  const sent = simulate(10, [...steady, ...flood], 300_000);
  const steadyAfter = sent.filter((request) => request.org !== 'acct-flood' && request.at >= 60_000 && request.at < 280_000);
  // 21 orgs on 10 sockets: a steady org's request waits about one round of 21 requests of 2 s / 10.
  assert.ok(Math.max(...waits(steadyAfter)) <= 8_000, `the steady orgs' waits after the flood came: at most ${Math.max(...waits(steadyAfter))} ms`);
});

test('an org that stops waiting and waits again keeps no place from its earlier wait (found by review)', () => {
  let now = 0;
  const share = new OrgSocketShare(10, 2, () => now);
  const served: string[] = [];
  const waitFor = (org: string, name: string, request: object = {}): void => share.wait(org, request, () => true, () => void (served.push(name), share.opened(org)));
  const heldByB = share.opened('acct-b');
  const heldByA = share.opened('acct-a');
  waitFor('acct-c', 'c1');
  const withdrawn = {};
  waitFor('acct-a', 'a1', withdrawn); // placed with A's standing then: early
  now = 10;
  share.closed('acct-a', heldByA); // A is placed again, later; C gets the room
  assert.deepEqual(served, ['c1']);
  share.forget('acct-a', withdrawn); // A stops waiting; its early entry stays behind in the heap
  waitFor('acct-d', 'd1');
  waitFor('acct-a', 'a2');
  now = 20;
  share.closed('acct-b', heldByB);
  assert.deepEqual(served, ['c1', 'd1'], "D's turn, not A's from its earlier wait");
});

test('orgs that came once are let go while others keep waiting: memory follows the orgs holding or wanting sockets (found by review)', () => {
  // One org always waits on 5 sockets; a new org sends one 2 s request every 500 ms for 2 hours.
  const steady = Array.from({ length: 10 }, () => stream('acct-steady', 0, 2_000, 7_200_000));
  const once: Sent[] = Array.from({ length: 14_000 }, (_, i) => ({ org: `acct-once-${i}`, at: i * 500, holdMs: 2_000 }));
  let share: OrgSocketShare | undefined;
  simulate(5, [...steady, ...once], 7_000_000, 10, (made) => (share = made));
  assert.ok(share!.trackedOrgs < 100, `orgs kept after 14,000 came: ${share!.trackedOrgs}`);
});

test('orgs sending one request at a time, alike, get alike shares: one served its last queued request keeps its usual hold (found by review)', () => {
  // 50 orgs, each sending a 2 s request 1 ms after the previous ends, on 5 sockets for 10 minutes.
  const orgs = Array.from({ length: 50 }, (_, i) => stream(`acct-alike-${i}`, 0, 2_000, 600_000));
  const sent = simulate(5, orgs, 600_000);
  const starts = new Map<string, number>();
  for (const request of sent) if (request.started !== undefined) starts.set(request.org, (starts.get(request.org) ?? 0) + 1);
  const counts = [...starts.values()].sort((a, b) => a - b);
  assert.ok(counts.length === 50 && counts.at(-1)! - counts[0]! <= 2, `starts per org: ${counts.join(', ')}`);
});
