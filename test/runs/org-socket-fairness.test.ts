// Past the process's total of webhook sockets, the orgs that wait take turns (org-socket-share.ts).
// Simulated on a moving clock, the load the first reverted try at turns by socket time failed
// (review, 2026-12-06), as a guard for the next (which should hand the share this clock): an org
// with a backlog gets its share beside orgs that send one request at a time, never passed by them
// for good. (Turns in sockets let a quick org through once per round of all the waiting orgs:
// README Limits, "webhook connections of the process".)

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
 * Runs `requests` (and those they send next) through a share of `total` sockets, 10 per org, on a
 * simulated clock until `untilMs`: each takes a socket when the share has room, or waits for one,
 * and closes it `holdMs` later.
 */
function simulate(total: number, requests: Sent[], untilMs: number): void {
  let now = 0;
  const share = new OrgSocketShare(10, total);
  const events: Array<{ readonly at: number; readonly run: () => void }> = [];
  const arrive = (request: Sent): void => {
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
}

test('an org with a backlog gets its share beside orgs that send one request at a time, and is not passed by them for good', () => {
  // Ten orgs each send a 2 s request and, 1 ms after it is done, the next, for 10 minutes; one org
  // queues 20 requests of 2 s at the start. 11 orgs on 5 sockets: the backlog's share is 5/11.
  const resend = (org: string) => (doneAt: number): Sent | undefined => (doneAt < 600_000 ? { org, at: doneAt + 1, holdMs: 2_000, next: resend(org) } : undefined);
  const steady: Sent[] = Array.from({ length: 10 }, (_, i) => ({ org: `acct-steady-${i}`, at: 0, holdMs: 2_000, next: resend(`acct-steady-${i}`) }));
  const backlog: Sent[] = Array.from({ length: 20 }, () => ({ org: 'acct-backlog', at: 0, holdMs: 2_000 }));
  simulate(5, [...steady, ...backlog], 700_000);

  const lastStart = Math.max(...backlog.map((request) => request.started ?? Number.POSITIVE_INFINITY));
  // 20 requests x 2 s = 40 socket-seconds at a fair 5/11 of a socket: about 88 s (turns in sockets
  // serve it by 78 s; the first reverted try never did).
  assert.ok(lastStart <= 120_000, `the backlog's last request started at ${lastStart} ms`);
});
