// Deleting an organization (offboarding): its data and keys go, and the hook-runner forgets it (its
// secrets, records of calls, fences and the modules no other org uses); its id is kept
// (deleted-orgs.ts) and never used again.
//
// 1. The mark, one durable transaction: the org's record leaves `orgs` and its deletion record is
//    written. The write fence (org-fence.ts) closes before it is queued, so from then on no write of
//    the org lands, and every request naming it is answered as for an org that never was (404).
// 2. At once, in memory: its runs stop (no further step is sent; an attempt out is withdrawn), its
//    live and device sockets close (4404), and its schedules fire no more (`onFenced`). While the
//    mark is written, a run command waits for it, and a write the fence refused (a run's transition,
//    a schedule's tick, a device's ending) is tried again should the mark fail, leaving the org; a
//    webhook request that gets its connection then is sent (withdrawn, it would fail its run).
// 3. In the background, side by side: the hook-runner forgets the org (ForgetOrg; a runner of an
//    earlier release without it deletes the org's secrets action by action), and every record of
//    the org leaves the ledger (org-removal.ts), each chunk adding to the record's tally as it goes;
//    then the records are counted again (none may be left), and the record says `removed`. The
//    ledger's part runs for many orgs at once, one pass at a time (org-passes.ts): the orgs deleted
//    while a pass runs go together in the next. A removal cut short (a stop, a crash, a hook-runner
//    that is down) is started again by each pass of the pruning loop (the first right after each
//    start), without holding the pass up.

import { logFailure } from '../ledger/commit-failure-guard.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { OrgTable } from '../ledger/org-fence.ts';
import type { Logger } from '../log.ts';
import type { DeletedOrgs, DeletionRecord } from './deleted-orgs.ts';
import type { Organization, OrganizationStore } from './organizations.ts';
import { OrgPasses } from './org-passes.ts';
import { countOrgRecords, removeOrgRecords } from './org-removal.ts';

/**
 * What a deletion asks of the hook-runner: to forget the org (its secrets, records of calls and
 * fences); a runner of an earlier release, without ForgetOrg (undefined), to delete its secrets.
 */
export interface RunnerForgetting {
  forgetOrg(orgId: string, signal?: AbortSignal): Promise<number | undefined>;
  listSecretKeys(scope: { readonly orgId: string; readonly actionId: string }): Promise<string[]>;
  deleteSecret(secret: { readonly orgId: string; readonly actionId: string; readonly key: string }): Promise<boolean>;
}

export interface OrgDeletionDeps {
  readonly ledger: Ledger;
  readonly orgs: OrganizationStore;
  readonly deleted: DeletedOrgs;
  readonly tables: () => readonly OrgTable[];
  /** The ids of the org's custom actions: with none, the hook-runner holds nothing of the org and is not asked. */
  readonly actionIds: (orgId: string) => string[];
  /** Absent when the runtime runs without a hook-runner (`--runner off`): none is asked (what a runner used before holds of the org stays there). */
  readonly runner: RunnerForgetting | undefined;
  /** Resolves once the org's secret writes in flight have settled (secret-writes.ts): none starts after the mark. */
  readonly secretWritesSettled: (orgId: string) => Promise<void>;
  /** Once the mark is committed (durable, or its flush failed): what the process holds of the org in memory lets it go. Called again on a retry. */
  readonly onFenced: (orgId: string) => void;
  /** Once the removal is finished: the little the process still keeps per org (seq counters, quota and refusal buckets) lets it go. */
  readonly onRemoved: (orgId: string) => void;
  readonly logger: Logger;
  readonly now: () => number;
  readonly stop: AbortSignal;
  readonly chunk?: number;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export class OrgDeletions {
  readonly #d: OrgDeletionDeps;
  /** The removals running now, per org. */
  readonly #running = new Map<string, Promise<DeletionRecord>>();
  /** The deletions being marked now, per org: a second request for one answers what the first does. */
  readonly #marking = new Map<string, Promise<DeletionRecord | undefined>>();
  /**
   * The ledger's part, for the orgs that ask together, one pass at a time: their records removed,
   * then counted again; each org gets what is left of it (nothing, unless the fence let a write by).
   */
  readonly #removals: OrgPasses<Record<string, number>>;

  constructor(deps: OrgDeletionDeps) {
    this.#d = deps;
    this.#removals = new OrgPasses(async (orgIds) => {
      const { ledger, tables, stop, chunk, deleted } = deps;
      await removeOrgRecords({ root: ledger.root, tables, stop, counted: (orgId, table, n) => deleted.countRemoved(orgId, table, n), ...(chunk === undefined ? {} : { chunk }) }, orgIds);
      // Counted again: a record the fence let through (a defect) would be left for good otherwise.
      return countOrgRecords(tables, orgIds, stop);
    });
  }

  /**
   * Marks the org deleted (durable when this resolves) and starts its removal; resolves with the
   * record, or undefined when there is no such org. An org already deleted answers its record (and
   * its removal goes on, if it had stopped). `matches` may refuse the org by throwing (a stale
   * If-Match), checked before the mark and again in its write: nothing is marked then.
   */
  async delete(orgId: string, matches: (stored: Organization) => void = () => undefined): Promise<DeletionRecord | undefined> {
    // Another request's mark under way answers this one too, once this one's If-Match holds for the
    // org as stored (read through the store, which fills in fields older records lack, as the tag
    // given out did); a mark committed meanwhile is as a deletion done.
    const marking = this.#marking.get(orgId);
    if (marking !== undefined) {
      const stored = this.#d.orgs.get(orgId);
      if (stored !== undefined) matches(stored);
      return marking;
    }
    const earlier = this.#d.deleted.get(orgId);
    if (earlier !== undefined) {
      if (earlier.state === 'removing') {
        // A mark whose flush failed answered 5xx before the process let go of the org: again now.
        this.#d.onFenced(orgId);
        this.#finishInBackground(earlier);
      }
      return earlier;
    }
    const org = this.#d.orgs.get(orgId);
    if (org === undefined) return undefined;
    // Checked first, and again in the mark's write: the mark fences the org off while it is written,
    // so a refused tag checked only there had every request of the org refused meanwhile (404).
    matches(org);
    const marked = this.#mark(orgId, matches);
    this.#marking.set(orgId, marked);
    try {
      return await marked;
    } finally {
      this.#marking.delete(orgId);
    }
  }

  async #mark(orgId: string, matches: (stored: Organization) => void): Promise<DeletionRecord | undefined> {
    const record: DeletionRecord = {
      organization_id: orgId,
      requested_at: iso(this.#d.now()),
      state: 'removing',
      removed_at: null,
      actions_with_secrets: this.#d.actionIds(orgId),
      removed: {},
    };
    const { orgs } = this.#d.ledger;
    let marked: boolean;
    try {
      const proceed = (): boolean => {
        // Through the store, as the If-Match given out was made: an older record lacks `updated_at`.
        const stored = this.#d.orgs.get(orgId);
        if (stored === undefined) return false;
        matches(stored);
        return true;
      };
      marked = await this.#d.orgs.deleting(orgId, () => this.#d.deleted.mark(record, proceed, () => void orgs.remove([orgId])));
    } catch (error) {
      // Committed, its flush failed: the org is fenced off all the same, so what it holds goes now.
      if (this.#d.deleted.has(orgId)) this.#d.onFenced(orgId);
      throw error;
    }
    // Deleted meanwhile by another request (it answers the same record), or gone before the mark.
    if (!marked) return this.#d.deleted.get(orgId);
    this.#d.onFenced(orgId);
    this.#finishInBackground(record);
    return record;
  }

  /** The org's deletion record, if it was deleted. */
  get(orgId: string): DeletionRecord | undefined {
    return this.#d.deleted.get(orgId);
  }

  /** Starts again, in the background, every deletion left unfinished (the pruning loop's job); answers their orgs. */
  resumeLeftOver(): string[] {
    const unfinished = this.#d.stop.aborted ? [] : this.#d.deleted.unfinished();
    for (const record of unfinished) this.#finishInBackground(record);
    return unfinished.map((record) => record.organization_id);
  }

  /** As resumeLeftOver, then waits for every removal; resolves with how many deletions are done. */
  async finishLeftOver(): Promise<number> {
    const started = this.resumeLeftOver();
    await this.idle();
    return started.filter((orgId) => this.#d.deleted.get(orgId)?.state === 'removed').length;
  }

  /** How many records of the org each table still holds (none once its removal is done). */
  async recordsLeft(orgId: string): Promise<Record<string, number>> {
    return (await countOrgRecords(this.#d.tables, [orgId])).get(orgId)!;
  }

  /** Resolves once no removal is running (tests, and the stop). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running.values()]);
  }

  #finishInBackground(record: DeletionRecord): void {
    if (this.#running.has(record.organization_id)) return;
    this.#finish(record).catch((error: unknown) => {
      if (!this.#d.stop.aborted) logFailure(this.#d.logger, 'organization removal stopped part way; the pruning loop goes on with it', { org: record.organization_id }, error);
    });
  }

  /** The hook-runner's part and the ledger's, side by side; the record says how far each got. */
  #finish(given: DeletionRecord): Promise<DeletionRecord> {
    const orgId = given.organization_id;
    const running = (async (): Promise<DeletionRecord> => {
      // As stored now: `given` may be a copy read before a removal that has finished since.
      const record = this.#d.deleted.get(orgId) ?? given;
      if (record.state === 'removed') return record;
      // Secrets being written when the org was fenced off are in the runner once these settle.
      await this.#d.secretWritesSettled(orgId);
      // At once, not after the runner: a runner that is wedged holds ForgetOrg up to its deadline
      // (10 min), and the org's records would stay on disk all that while. Each chunk removed adds
      // to the record's tally in its own transaction, so `removed` survives a stop.
      const [forgotten, removal] = await Promise.allSettled([this.#forgetInRunner(orgId, record.actions_with_secrets), this.#removals.run(orgId)]);
      if (forgotten.status === 'rejected') throw forgotten.reason;
      if (removal.status === 'rejected') throw removal.reason;
      const actions = forgotten.value;
      const left = removal.value;
      if (Object.keys(left).length > 0) this.#d.logger.error('records of a deleted organization were left after its removal; the pruning loop removes them', { org: orgId, left });
      const done = actions.length === 0 && Object.keys(left).length === 0;
      const { removed } = this.#d.deleted.get(orgId) ?? record;
      const next: DeletionRecord = { ...record, state: done ? 'removed' : 'removing', removed_at: done ? iso(this.#d.now()) : null, actions_with_secrets: actions, removed };
      await this.#d.deleted.update(next);
      if (done) {
        this.#d.onRemoved(orgId);
        this.#d.logger.info('organization removed', { org: orgId, records: Object.values(removed).reduce((a, b) => a + b, 0) });
      }
      return next;
    })();
    this.#running.set(orgId, running);
    const forget = (): void => void this.#running.delete(orgId);
    running.then(forget, forget);
    return running;
  }

  /**
   * Has the hook-runner forget the org, when the org has custom actions (`pending`: their ids, as at
   * the mark; without any, the runner holds nothing of it); answers what is still pending: all of
   * them when the runner could not be reached.
   */
  async #forgetInRunner(orgId: string, pending: readonly string[]): Promise<readonly string[]> {
    const { runner } = this.#d;
    if (runner === undefined || pending.length === 0) return [];
    try {
      this.#d.stop.throwIfAborted();
      if ((await runner.forgetOrg(orgId, this.#d.stop)) !== undefined) return [];
    } catch (error) {
      if (this.#d.stop.aborted) throw error;
      // A runner down, wedged or below its disk floor: tried again at a later pass.
      logFailure(this.#d.logger, 'the hook-runner could not forget a deleted organization (its secrets, records of calls and fences); tried again at the next pruning pass', { org: orgId }, error);
      return pending;
    }
    this.#d.logger.warn('the hook-runner is of an earlier release, without ForgetOrg: only its secrets of the deleted organization are deleted; its records of calls and fences go when pruned, 30 days after each call. Upgrade the hook-runner.', { org: orgId });
    return this.#deleteSecrets(runner, orgId, pending);
  }

  /** Deletes the runner's secrets of each action (an earlier runner's part); answers the actions it could not finish. */
  async #deleteSecrets(runner: RunnerForgetting, orgId: string, actionIds: readonly string[]): Promise<readonly string[]> {
    for (const [i, actionId] of actionIds.entries()) {
      try {
        this.#d.stop.throwIfAborted();
        for (const key of await runner.listSecretKeys({ orgId, actionId })) {
          // A stop waits for one call at most, not one per secret (each has a deadline of seconds).
          this.#d.stop.throwIfAborted();
          await runner.deleteSecret({ orgId, actionId, key });
        }
      } catch (error) {
        if (this.#d.stop.aborted) throw error;
        logFailure(this.#d.logger, 'the hook-runner could not delete the secrets of a deleted organization; tried again at the next pruning pass', { org: orgId, action: actionId }, error);
        return actionIds.slice(i);
      }
    }
    return [];
  }
}
