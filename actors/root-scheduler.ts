// The root of admission: one supervisor per tenant, served round-robin so that one tenant's
// flood never delays another tenant's first run by more than one admission per busy tenant.
//
// Fairness: tenants that can admit (a run ready, a slot free) wait in a ring; each turn admits
// exactly one run of the tenant at the head, which then goes to the back if it still can.
// With an optional process-wide cap (`maxActiveRuns`), a freed slot goes to the next tenant in
// the ring, not to the tenant with the longest queue. Every operation is O(1) amortised.
// Not durable by design: on boot the shell admits the runs it reclaims on the spot (`admitNow`)
// and re-enqueues every other run whose pendingWork is `await_admission`, in the order they were
// created (runtime/runs/run-recovery.ts).

import type { OrgId, RunId } from './ids.ts';
import { FifoQueue } from './fifo-queue.ts';
import type { AdmissionLane } from './run-work.ts';
import { checkLimit, DEFAULT_MAX_CONCURRENT_RUNS, TenantSupervisor, type RunPlace } from './tenant-supervisor.ts';

export interface Admission {
  readonly orgId: OrgId;
  readonly runId: RunId;
}

export interface RootSchedulerOptions {
  /** Per-tenant limit for tenants without `setLimit`; default 4. */
  readonly defaultLimit?: number;
  /** Runs `running` across all tenants; default unlimited (only per-tenant limits apply). */
  readonly maxActiveRuns?: number;
}

export interface TenantStats {
  readonly limit: number;
  readonly running: number;
  readonly queued: number;
}

/** Long-lived in-memory state owned by the runtime's composition root; one per process. */
export class RootScheduler {
  readonly #tenants = new Map<OrgId, TenantSupervisor>();
  readonly #limits = new Map<OrgId, number>();
  readonly #ring = new FifoQueue<OrgId>();
  readonly #inRing = new Set<OrgId>();
  readonly #defaultLimit: number;
  readonly #maxActive: number;
  #active = 0;

  constructor(options: RootSchedulerOptions = {}) {
    this.#defaultLimit = checkLimit(options.defaultLimit ?? DEFAULT_MAX_CONCURRENT_RUNS);
    const maxActive = options.maxActiveRuns ?? Number.POSITIVE_INFINITY;
    if (!(maxActive >= 1)) throw new RangeError(`maxActiveRuns must be >= 1, got ${maxActive}`);
    this.#maxActive = maxActive;
  }

  get activeRuns(): number {
    return this.#active;
  }

  /**
   * Makes a run ready. `new` for a run never admitted; `resume` for one that already claimed a
   * step (timer fired, resumed, recovered): it goes ahead of its tenant's new runs. Idempotent.
   */
  enqueue(orgId: OrgId, runId: RunId, lane: AdmissionLane = 'new'): boolean {
    const tenant = this.#tenant(orgId);
    const added = tenant.enqueue(runId, lane);
    this.#offer(tenant);
    return added;
  }

  /**
   * Admits a run on the spot, without queueing, when that is what `enqueue` followed by
   * `nextAdmissions` would do anyway: its tenant has no run waiting and a free slot, and the
   * process-wide cap has room with no other tenant waiting for it. Lets the shell start a run in
   * the transaction that creates it (or, on boot, that reclaims it). Returns false (and changes
   * nothing) otherwise; if that transaction is abandoned, `release` the run. Boot offers runs in
   * creation order across tenants, so under a process-wide cap (the runtime sets none) the
   * first slots after a restart go by age rather than round-robin.
   */
  admitNow(orgId: OrgId, runId: RunId): boolean {
    if (this.#active >= this.#maxActive || (Number.isFinite(this.#maxActive) && this.#ring.size > 0)) return false;
    const existing = this.#tenants.get(orgId);
    if (existing !== undefined && (existing.queuedCount > 0 || existing.placeOf(runId) !== 'absent')) return false;
    const tenant = existing ?? this.#tenant(orgId);
    if (tenant.runningCount >= tenant.limit) {
      if (tenant.isIdle()) this.#tenants.delete(orgId);
      return false;
    }
    tenant.enqueue(runId, 'new');
    tenant.admitNext();
    this.#active += 1;
    return true;
  }

  /**
   * The run finished, failed, was cancelled or parked on a timer: free its slot, or drop it
   * from the queue if it was never admitted. Returns where it was.
   */
  release(orgId: OrgId, runId: RunId): RunPlace {
    const tenant = this.#tenants.get(orgId);
    if (tenant === undefined) return 'absent';
    const place = tenant.release(runId);
    if (place === 'running') this.#active -= 1;
    if (tenant.isIdle()) this.#tenants.delete(orgId);
    else this.#offer(tenant);
    return place;
  }

  /** Drops the tenant, its queue and its slots at once (its org was deleted): none of its runs is admitted again. */
  forget(orgId: OrgId): void {
    const tenant = this.#tenants.get(orgId);
    if (tenant !== undefined) this.#active -= tenant.runningCount;
    this.#tenants.delete(orgId);
    this.#limits.delete(orgId);
  }

  /** Sets a tenant's `max_concurrent_runs` (0 pauses admission). Never preempts running runs. */
  setLimit(orgId: OrgId, limit: number): void {
    checkLimit(limit);
    const tenant = this.#tenant(orgId);
    tenant.setLimit(limit);
    this.#limits.set(orgId, limit);
    if (tenant.isIdle()) this.#tenants.delete(orgId);
    else this.#offer(tenant);
  }

  /**
   * Admits runs round-robin across tenants until no tenant can admit, the process-wide cap is
   * reached, or `max` admissions were made. Send `run.admitted` to each returned run, in order.
   */
  nextAdmissions(max = Number.POSITIVE_INFINITY): Admission[] {
    const admitted: Admission[] = [];
    while (admitted.length < max && this.#active < this.#maxActive) {
      const orgId = this.#ring.shift();
      if (orgId === undefined) break;
      this.#inRing.delete(orgId);
      const tenant = this.#tenants.get(orgId);
      const runId = tenant?.admitNext();
      if (tenant === undefined || runId === undefined) continue;
      this.#active += 1;
      admitted.push({ orgId, runId });
      this.#offer(tenant);
    }
    return admitted;
  }

  stats(orgId: OrgId): TenantStats {
    const tenant = this.#tenants.get(orgId);
    const limit = this.#limits.get(orgId) ?? this.#defaultLimit;
    return { limit, running: tenant?.runningCount ?? 0, queued: tenant?.queuedCount ?? 0 };
  }

  /** Runs holding a slot and runs waiting for one, over every tenant (O(tenants): for a metrics scrape). */
  totals(): { readonly running: number; readonly queued: number } {
    let running = 0;
    let queued = 0;
    for (const tenant of this.#tenants.values()) {
      running += tenant.runningCount;
      queued += tenant.queuedCount;
    }
    return { running, queued };
  }

  placeOf(orgId: OrgId, runId: RunId): RunPlace {
    return this.#tenants.get(orgId)?.placeOf(runId) ?? 'absent';
  }

  /** Tenants with work in memory (idle tenants are dropped, so this stays bounded). */
  get tenantCount(): number {
    return this.#tenants.size;
  }

  #tenant(orgId: OrgId): TenantSupervisor {
    let tenant = this.#tenants.get(orgId);
    if (tenant === undefined) {
      tenant = new TenantSupervisor(orgId, this.#limits.get(orgId) ?? this.#defaultLimit);
      this.#tenants.set(orgId, tenant);
    }
    return tenant;
  }

  /** Puts an admissible tenant at the back of the ring unless it is already waiting there. */
  #offer(tenant: TenantSupervisor): void {
    if (!tenant.canAdmit() || this.#inRing.has(tenant.orgId)) return;
    this.#inRing.add(tenant.orgId);
    this.#ring.push(tenant.orgId);
  }
}
