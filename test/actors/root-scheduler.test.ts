// Admission: per-tenant limits, FIFO within a tenant with the resume lane first, round-robin
// across tenants, and the 100,000-run flood measured in scheduler steps, not wall time.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FifoQueue } from '../../actors/fifo-queue.ts';
import { asOrgId, asRunId, type OrgId, type RunId } from '../../actors/ids.ts';
import { RootScheduler } from '../../actors/root-scheduler.ts';
import { TenantSupervisor } from '../../actors/tenant-supervisor.ts';

const A = asOrgId('org_a');
const B = asOrgId('org_b');
const C = asOrgId('org_c');
const run = (org: string, n: number): RunId => asRunId(`${org}-${n}`);
const ids = (admissions: ReadonlyArray<{ runId: RunId }>): string[] => admissions.map((x) => x.runId);

describe('FifoQueue', () => {
  it('keeps order across growth and wrap-around', () => {
    const q = new FifoQueue<number>(2);
    const out: number[] = [];
    for (let i = 0; i < 10; i += 1) {
      q.push(i);
      if (i % 3 === 0) out.push(q.shift() ?? -1);
    }
    while (q.size > 0) out.push(q.shift() ?? -1);
    assert.deepEqual(out, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.equal(q.shift(), undefined);
  });
});

describe('RootScheduler: one tenant', () => {
  it('admits up to the default limit of 4, FIFO, and the next one when a slot frees', () => {
    const s = new RootScheduler();
    for (let i = 1; i <= 6; i += 1) s.enqueue(A, run('a', i));
    assert.deepEqual(ids(s.nextAdmissions()), ['a-1', 'a-2', 'a-3', 'a-4']);
    assert.deepEqual(s.nextAdmissions(), []);
    assert.equal(s.release(A, run('a', 2)), 'running');
    assert.deepEqual(ids(s.nextAdmissions()), ['a-5']);
    assert.deepEqual(s.stats(A), { limit: 4, running: 4, queued: 1 });
  });

  it('is idempotent for enqueue and drops a queued run on release', () => {
    const s = new RootScheduler({ defaultLimit: 1 });
    assert.equal(s.enqueue(A, run('a', 1)), true);
    assert.equal(s.enqueue(A, run('a', 1)), false);
    s.enqueue(A, run('a', 2));
    s.enqueue(A, run('a', 3));
    assert.equal(s.release(A, run('a', 2)), 'queued', 'cancelled before admission');
    assert.equal(s.release(A, run('a', 2)), 'absent');
    assert.deepEqual(ids(s.nextAdmissions()), ['a-1']);
    assert.equal(s.enqueue(A, run('a', 1)), false, 'a running run is not queued again');
    s.release(A, run('a', 1));
    assert.deepEqual(ids(s.nextAdmissions()), ['a-3']);
  });

  it('puts woken runs (resume lane) ahead of new ones, FIFO among themselves', () => {
    const s = new RootScheduler({ defaultLimit: 1 });
    s.enqueue(A, run('a', 1));
    s.enqueue(A, run('a', 2));
    assert.deepEqual(ids(s.nextAdmissions()), ['a-1']);
    s.enqueue(A, run('a', 3));
    s.release(A, run('a', 1)); // parked on a retry timer: gives its slot back
    s.enqueue(A, run('a', 9), 'resume');
    s.enqueue(A, run('a', 1), 'resume'); // its timer fired
    const order: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      const [next] = s.nextAdmissions();
      assert.ok(next);
      order.push(next.runId);
      s.release(A, next.runId);
    }
    assert.deepEqual(order, ['a-9', 'a-1', 'a-2', 'a-3']);
    assert.equal(s.tenantCount, 0, 'idle tenants are dropped');
  });

  it('applies setLimit without preempting, and 0 pauses admission', () => {
    const s = new RootScheduler();
    for (let i = 1; i <= 5; i += 1) s.enqueue(A, run('a', i));
    s.setLimit(A, 2);
    assert.deepEqual(ids(s.nextAdmissions()), ['a-1', 'a-2']);
    s.setLimit(A, 1);
    s.release(A, run('a', 1));
    assert.deepEqual(s.nextAdmissions(), [], 'still 1 running, at the new limit');
    s.setLimit(A, 0);
    s.release(A, run('a', 2));
    assert.deepEqual(s.nextAdmissions(), []);
    s.setLimit(A, 3);
    assert.deepEqual(ids(s.nextAdmissions()), ['a-3', 'a-4', 'a-5']);
    assert.equal(s.stats(A).limit, 3);
    assert.throws(() => s.setLimit(A, -1), RangeError);
    assert.throws(() => s.setLimit(A, 1.5), RangeError);
  });
});

describe('TenantSupervisor: runs cancelled while queued', () => {
  it('at limit 0, 10,000 queued and cancelled runs leave a bounded number of tickets, and order is kept', () => {
    const tenant = new TenantSupervisor(A, 0);
    tenant.enqueue(run('a', 0), 'new');
    tenant.enqueue(run('a', -1), 'resume');
    for (let i = 1; i <= 10_000; i += 1) {
      tenant.enqueue(run('a', i), 'new');
      assert.equal(tenant.release(run('a', i)), 'queued');
    }
    tenant.enqueue(run('a', 10_001), 'new');
    assert.ok(tenant.ticketCount < 2_000, `${tenant.ticketCount} tickets held for 3 queued runs`);
    assert.deepEqual(tenant.queuedInOrder(), [run('a', -1), run('a', 0), run('a', 10_001)]);
    tenant.setLimit(3);
    assert.deepEqual([tenant.admitNext(), tenant.admitNext(), tenant.admitNext(), tenant.admitNext()], [run('a', -1), run('a', 0), run('a', 10_001), undefined]);
  });
});

describe('RootScheduler: fairness across tenants', () => {
  it('serves tenants round-robin within one batch', () => {
    const s = new RootScheduler({ defaultLimit: 10 });
    for (let i = 1; i <= 3; i += 1) {
      s.enqueue(A, run('a', i));
      s.enqueue(B, run('b', i));
    }
    s.enqueue(C, run('c', 1));
    assert.deepEqual(ids(s.nextAdmissions()), ['a-1', 'b-1', 'c-1', 'a-2', 'b-2', 'a-3', 'b-3']);
  });

  it('honours a process-wide cap and respects `max` per call', () => {
    const s = new RootScheduler({ defaultLimit: 10, maxActiveRuns: 3 });
    for (let i = 1; i <= 5; i += 1) s.enqueue(A, run('a', i));
    assert.equal(s.nextAdmissions(2).length, 2);
    assert.equal(s.nextAdmissions().length, 1);
    assert.equal(s.activeRuns, 3);
    assert.deepEqual(s.nextAdmissions(), []);
  });

  it('forgets a tenant whole (its org was deleted): its slots go back to the cap, its queue is never admitted', () => {
    const s = new RootScheduler({ defaultLimit: 2, maxActiveRuns: 2 });
    for (let i = 1; i <= 4; i += 1) s.enqueue(A, run('a', i));
    s.enqueue(B, run('b', 1));
    assert.deepEqual(ids(s.nextAdmissions()), ['a-1', 'b-1']);
    s.forget(A);
    assert.equal(s.activeRuns, 1);
    assert.equal(s.placeOf(A, run('a', 2)), 'absent');
    s.enqueue(B, run('b', 2));
    assert.deepEqual(ids(s.nextAdmissions()), ['b-2'], "the freed slot goes to B; none of A's queued runs is admitted");
    assert.equal(s.release(A, run('a', 1)), 'absent', "a late release of A's run gives back nothing twice");
    assert.equal(s.activeRuns, 2);
  });

  /**
   * Tenant A floods 100,000 runs, then B enqueues one. Each scheduler step finishes one running
   * run (oldest first) and asks for admissions. Round-robin bounds B's wait by one admission of
   * each tenant ahead of it in the ring: here at most one of A's, i.e. B runs on the second
   * freed slot at the latest. Without a process cap, B does not wait for A at all.
   */
  for (const cap of [4, undefined]) {
    it(`admits B's first run within one of A's admissions despite 100,000 queued (cap ${String(cap)})`, () => {
      const s = new RootScheduler(cap === undefined ? { defaultLimit: 4 } : { defaultLimit: 100, maxActiveRuns: cap });
      for (let i = 0; i < 100_000; i += 1) s.enqueue(A, run('a', i));
      const active = new FifoQueue<{ orgId: OrgId; runId: RunId }>();
      for (const admission of s.nextAdmissions()) active.push(admission);
      let aAdmitted = active.size;
      s.enqueue(B, run('b', 0));

      let aAdmissionsBeforeB = 0;
      let steps = 0;
      let admittedB = false;
      while (!admittedB) {
        steps += 1;
        const done = active.shift();
        if (done !== undefined) s.release(done.orgId, done.runId);
        for (const admission of s.nextAdmissions()) {
          active.push(admission);
          if (admission.orgId === B) admittedB = true;
          else {
            aAdmitted += 1;
            if (!admittedB) aAdmissionsBeforeB += 1;
          }
        }
      }
      assert.equal(aAdmissionsBeforeB, cap === undefined ? 0 : 1);
      assert.equal(steps, cap === undefined ? 1 : 2);
      assert.equal(s.stats(A).queued, 100_000 - aAdmitted);
      assert.ok(s.stats(A).running <= (cap ?? 4));
    });
  }

  it('drains a 100,000-run flood in order with O(1) work per admission', () => {
    const s = new RootScheduler({ defaultLimit: 1 });
    for (let i = 0; i < 100_000; i += 1) s.enqueue(A, run('a', i));
    for (let i = 0; i < 100_000; i += 2) s.release(A, run('a', i)); // cancel half while queued
    let expected = 1;
    for (;;) {
      const [next] = s.nextAdmissions();
      if (next === undefined) break;
      assert.equal(next.runId, `a-${expected}`);
      s.release(A, next.runId);
      expected += 2;
    }
    assert.equal(expected, 100_001);
    assert.equal(s.tenantCount, 0);
  });
});

describe('RootScheduler: admitNow (start a new run in the transaction that creates it)', () => {
  it('admits on the spot only while the tenant has a free slot and nothing waiting', () => {
    const s = new RootScheduler({ defaultLimit: 2 });
    assert.equal(s.admitNow(A, run('a', 1)), true);
    assert.equal(s.admitNow(A, run('a', 1)), false, 'a run already admitted is not admitted twice');
    assert.equal(s.admitNow(A, run('a', 2)), true);
    assert.equal(s.admitNow(A, run('a', 3)), false, 'no free slot');
    assert.deepEqual(s.stats(A), { limit: 2, running: 2, queued: 0 });
    assert.equal(s.activeRuns, 2);
    // A run that waits keeps later runs from jumping it, even once a slot frees.
    s.enqueue(A, run('a', 3));
    s.release(A, run('a', 1));
    assert.equal(s.admitNow(A, run('a', 4)), false);
    assert.deepEqual(ids(s.nextAdmissions()), ['a-3']);
    // Other tenants are unaffected; a paused tenant (limit 0) admits nothing.
    assert.equal(s.admitNow(B, run('b', 1)), true);
    s.setLimit(C, 0);
    assert.equal(s.admitNow(C, run('c', 1)), false);
    assert.deepEqual(s.stats(C), { limit: 0, running: 0, queued: 0 });
  });

  it('releases a run admitted on the spot like any other, and leaves no idle tenant behind', () => {
    const s = new RootScheduler({ defaultLimit: 1 });
    assert.equal(s.admitNow(A, run('a', 1)), true);
    assert.equal(s.placeOf(A, run('a', 1)), 'running');
    assert.equal(s.release(A, run('a', 1)), 'running');
    assert.equal(s.activeRuns, 0);
    assert.equal(s.tenantCount, 0);
    assert.equal(s.admitNow(A, run('a', 2)), true);
  });

  it('never takes a process-wide slot that a waiting tenant is owed', () => {
    const s = new RootScheduler({ defaultLimit: 4, maxActiveRuns: 1 });
    assert.equal(s.admitNow(A, run('a', 1)), true);
    assert.equal(s.admitNow(B, run('b', 1)), false, 'the cap is reached');
    s.enqueue(B, run('b', 1));
    s.release(A, run('a', 1));
    assert.equal(s.admitNow(C, run('c', 1)), false, 'B waits in the ring for the freed slot');
    assert.deepEqual(ids(s.nextAdmissions()), ['b-1']);
  });
});
