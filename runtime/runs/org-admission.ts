// The run engine's admission: the root scheduler (actors/root-scheduler.ts, which decides the order)
// with each org's concurrency limit read from its record on first use, and again when the org changes.

import { asOrgId, type OrgId, type RunId } from '../../actors/ids.ts';
import { RootScheduler, type Admission } from '../../actors/root-scheduler.ts';
import type { AdmissionLane } from '../../actors/run-work.ts';
import type { RunPlace } from '../../actors/tenant-supervisor.ts';
import { DEFAULT_MAX_CONCURRENT_RUNS, type OrganizationStore } from '../tenancy/organizations.ts';

export class OrgAdmission {
  readonly #scheduler = new RootScheduler();
  readonly #orgs: Pick<OrganizationStore, 'get'>;
  /** Orgs whose limit the scheduler has been given. */
  readonly #limitsSet = new Set<string>();

  constructor(orgs: Pick<OrganizationStore, 'get'>) {
    this.#orgs = orgs;
  }

  /** Queues the run for a slot of its org (FIFO within the org and lane). */
  enqueue(orgId: OrgId, runId: RunId, lane: AdmissionLane): void {
    this.#ensureLimit(orgId);
    this.#scheduler.enqueue(orgId, runId, lane);
  }

  /** Takes a slot for the run at once if its org has a free one and nothing waiting (RootScheduler.admitNow). */
  admitNow(orgId: OrgId, runId: RunId): boolean {
    this.#ensureLimit(orgId);
    return this.#scheduler.admitNow(orgId, runId);
  }

  release(orgId: OrgId, runId: RunId): void {
    this.#scheduler.release(orgId, runId);
  }

  /** Gives back the run's slot or its place in the queue, whichever it holds, if any. */
  leave(orgId: OrgId, runId: RunId): void {
    if (this.#scheduler.placeOf(orgId, runId) !== 'absent') this.#scheduler.release(orgId, runId);
  }

  /** The org was deleted: its runs leave the queue and their slots at once, and are never admitted. */
  forgetOrg(orgId: OrgId): void {
    this.#scheduler.forget(orgId);
    this.#limitsSet.delete(orgId);
  }

  placeOf(orgId: OrgId, runId: RunId): RunPlace {
    return this.#scheduler.placeOf(orgId, runId);
  }

  /** How many of the org's runs wait for a slot. */
  queued(orgId: OrgId): number {
    return this.#scheduler.stats(orgId).queued;
  }

  /** The runs to admit now (at most `max`), orgs taking turns; each has its slot already. */
  nextAdmissions(max: number): Admission[] {
    return this.#scheduler.nextAdmissions(max);
  }

  /** Reads the org's concurrency limit again (after the org is updated). */
  refreshLimit(orgId: string): void {
    this.#limitsSet.delete(orgId);
    this.#ensureLimit(orgId);
  }

  #ensureLimit(orgId: string): void {
    if (this.#limitsSet.has(orgId)) return;
    const org = this.#orgs.get(orgId);
    this.#scheduler.setLimit(asOrgId(orgId), org?.max_concurrent_runs ?? DEFAULT_MAX_CONCURRENT_RUNS);
    this.#limitsSet.add(orgId);
  }
}
