// The run engine's admission: the root scheduler (actors/root-scheduler.ts, which decides the order)
// with each org's concurrency limit read from its record on first use, and again when the org
// changes. An org's production and sandbox runs queue apart, each environment with the org's
// limit and turn of its own: a load test in the sandbox (thousands of queued runs, every slot held
// by a receiver that never answers) neither delays production runs nor fills their queue.

import { asOrgId, type OrgId, type RunId } from '../../actors/ids.ts';
import { RootScheduler, type Admission } from '../../actors/root-scheduler.ts';
import type { Environment } from '../../actors/run-types.ts';
import type { AdmissionLane } from '../../actors/run-work.ts';
import type { RunPlace } from '../../actors/tenant-supervisor.ts';
import { ENVIRONMENTS } from '../sources/source-record.ts';
import { DEFAULT_MAX_CONCURRENT_RUNS, type OrganizationStore } from '../tenancy/organizations.ts';

/** The scheduler's tenant for an org's environment: the org's id for production, as before environments queued apart. */
const queueOf = (orgId: string, environment: Environment): OrgId => asOrgId(environment === 'production' ? orgId : `${orgId}\u0000${environment}`);
/** The org a scheduler tenant belongs to. */
const orgOf = (queue: string): OrgId => asOrgId(queue.split('\u0000')[0]!);

export class OrgAdmission {
  readonly #scheduler = new RootScheduler();
  readonly #orgs: Pick<OrganizationStore, 'get'>;
  /** Scheduler tenants whose limit it has been given. */
  readonly #limitsSet = new Set<string>();
  /**
   * Per org, the sandbox runs the scheduler holds (queued or running), so that their slot or place
   * is found by org and run id alone; per org, so that deleting one looks at its own only.
   */
  readonly #sandboxRuns = new Map<string, Set<string>>();

  constructor(orgs: Pick<OrganizationStore, 'get'>) {
    this.#orgs = orgs;
  }

  /** Queues the run for a slot of its org's environment (FIFO within it and the lane). */
  enqueue(orgId: OrgId, runId: RunId, lane: AdmissionLane, environment: Environment): void {
    const queue = this.#hold(orgId, runId, environment);
    this.#scheduler.enqueue(queue, runId, lane);
  }

  /** Takes a slot for the run at once if its org's environment has a free one and nothing waiting (RootScheduler.admitNow). */
  admitNow(orgId: OrgId, runId: RunId, environment: Environment): boolean {
    const queue = this.#hold(orgId, runId, environment);
    const admitted = this.#scheduler.admitNow(queue, runId);
    if (!admitted && this.#scheduler.placeOf(queue, runId) === 'absent') this.#forgetSandboxRun(orgId, runId);
    return admitted;
  }

  release(orgId: OrgId, runId: RunId): void {
    this.#scheduler.release(this.#queueOfRun(orgId, runId), runId);
    this.#forgetSandboxRun(orgId, runId);
  }

  /** Gives back the run's slot or its place in the queue, whichever it holds, if any. */
  leave(orgId: OrgId, runId: RunId): void {
    if (this.placeOf(orgId, runId) !== 'absent') this.release(orgId, runId);
  }

  /** The org was deleted: its runs leave the queues and their slots at once, and are never admitted. */
  forgetOrg(orgId: OrgId): void {
    for (const environment of ENVIRONMENTS) {
      this.#scheduler.forget(queueOf(orgId, environment));
      this.#limitsSet.delete(queueOf(orgId, environment));
    }
    this.#sandboxRuns.delete(orgId);
  }

  placeOf(orgId: OrgId, runId: RunId): RunPlace {
    return this.#scheduler.placeOf(this.#queueOfRun(orgId, runId), runId);
  }

  /** How many of the org's runs in `environment` wait for a slot. */
  queued(orgId: OrgId, environment: Environment): number {
    return this.#scheduler.stats(queueOf(orgId, environment)).queued;
  }

  /** Runs holding a slot and runs waiting for one, over every org and environment. */
  totals(): { readonly running: number; readonly queued: number } {
    return this.#scheduler.totals();
  }

  /** The runs to admit now (at most `max`), orgs (and their environments) taking turns; each has its slot already. */
  nextAdmissions(max: number): Admission[] {
    return this.#scheduler.nextAdmissions(max).map(({ orgId, runId }) => ({ orgId: orgOf(orgId), runId }));
  }

  /** Reads the org's concurrency limit again (after the org is updated). */
  refreshLimit(orgId: string): void {
    for (const environment of ENVIRONMENTS) {
      this.#limitsSet.delete(queueOf(orgId, environment));
      this.#ensureLimit(orgId, environment);
    }
  }

  /** The run's scheduler tenant, remembered for a sandbox run. */
  #hold(orgId: OrgId, runId: RunId, environment: Environment): OrgId {
    this.#ensureLimit(orgId, environment);
    if (environment === 'sandbox') {
      let runs = this.#sandboxRuns.get(orgId);
      if (runs === undefined) this.#sandboxRuns.set(orgId, (runs = new Set()));
      runs.add(runId);
    }
    return queueOf(orgId, environment);
  }

  #forgetSandboxRun(orgId: OrgId, runId: RunId): void {
    const runs = this.#sandboxRuns.get(orgId);
    if (runs?.delete(runId) === true && runs.size === 0) this.#sandboxRuns.delete(orgId);
  }

  #queueOfRun(orgId: OrgId, runId: RunId): OrgId {
    return queueOf(orgId, this.#sandboxRuns.get(orgId)?.has(runId) === true ? 'sandbox' : 'production');
  }

  #ensureLimit(orgId: string, environment: Environment): void {
    const queue = queueOf(orgId, environment);
    if (this.#limitsSet.has(queue)) return;
    const org = this.#orgs.get(orgId);
    this.#scheduler.setLimit(queue, org?.max_concurrent_runs ?? DEFAULT_MAX_CONCURRENT_RUNS);
    this.#limitsSet.add(queue);
  }
}
