// Durable storage of workflows: the current document, its immutable versions, the trigger index
// ingest matches events against, and the workflow's signing secrets. Every write is one transaction.
// Matches are cached: one store per ledger, the tables' only writer.
//
// Databases (every key starts with the org id):
//   workflows           [orgId, workflowId]                                -> Workflow (current)
//   workflow-versions   [orgId, workflowId, version]                        -> WorkflowVersion (never rewritten)
//   workflow-triggers   [orgId, environment, trigger_event, workflowId]     -> [current version, its JSON size], present iff enabled (trigger-index.ts)
//   workflow-secrets    [orgId, workflowId]                                 -> SigningSecretsRecord
//   workflow-org-bytes  [orgId]                                             -> bytes of all its stored versions (version-bytes.ts)
//   workflow-create-keys                                                    -> the Idempotency-Key each was created with (create-keys.ts)
// Caps: workflow-limits.ts; decoded versions: pinned-versions.ts; refusals and their errors: write-outcome.ts.
// Deleting a workflow removes the first and third; versions and secrets stay so runs pinned to a
// version can still finish (and still sign their webhooks), until no run names it (deleted-workflows.ts).

import { isDeepStrictEqual } from 'node:util';
import { randomUUID } from 'node:crypto';
import type { LedgerTable } from '../ledger/ledger.ts';
import { asOrgId, asWorkflowId, type WorkflowId } from '../../actors/ids.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { passesOverTable } from '../ledger/passes-over-table.ts';
import { DeletedWorkflows } from './deleted-workflows.ts';
import { RecordCache } from '../ledger/record-cache.ts';
import { earlierRotation, newSigningSecret, rotatedRecord, rotateSecrets, type SigningSecretsRecord } from './signing-secrets.ts';
import { nextWorkflow, toWorkflowVersion } from './workflow-record.ts';
import { OrgVersionBytes, versionSize } from './version-bytes.ts';
import { WorkflowCreateKeys } from './create-keys.ts';
import { PinnedVersions } from './pinned-versions.ts';
import { isVersionRef, TriggerIndex, type MatchRef } from './trigger-index.ts';
import { MAX_TRIGGER_BYTES, MAX_VERSION_BYTES_PER_ORG, MAX_VERSIONS_PER_WORKFLOW, MAX_WORKFLOWS_PER_ORG, MAX_WORKFLOWS_PER_TRIGGER, PINNED_CACHE, type WorkflowStoreLimits } from './workflow-limits.ts';
import { unwrap, type Outcome, type VersionRefused } from './write-outcome.ts';
import type { Workflow, WorkflowDraft, WorkflowEnvironment, WorkflowStatus, WorkflowVersion } from './workflow-types.ts';

const WORKFLOW_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HIGH = '\uffff';

const NO_MATCHES: readonly WorkflowVersion[] = Object.freeze([]);

/** True for the ids this store mints (lower-case UUIDs); anything else cannot name a workflow. */
export const isWorkflowId = (value: string): value is WorkflowId => WORKFLOW_ID.test(value);

/** A workflow `create` made, or (`earlier`) the one its idempotency key had made before. */
export interface CreatedWorkflow {
  readonly workflow: Workflow;
  readonly signingSecret: string;
  readonly earlier: boolean;
}

export interface UpdateOptions {
  /** Refuse (409 `workflow_version_conflict`) unless the current version is still this one. */
  readonly ifVersion?: number;
}

export class WorkflowStore {
  readonly #root: Ledger['root'];
  readonly #workflows: LedgerTable;
  readonly #versions: LedgerTable;
  readonly #triggers: TriggerIndex;
  readonly #secrets: LedgerTable;
  /** [orgId, environment, created_at, workflowId] -> 1: the workflows of an environment, oldest first, for paging without reading them all. */
  readonly #order: LedgerTable;
  /** Decoded pinned versions: every event and step reads one, and a version never changes. */
  readonly #pinned: PinnedVersions;
  /**
   * `matching` answers (empty ones too: most event types trigger nothing), forgotten per org on
   * every workflow write. They name versions rather than hold them, so only #pinned weighs them.
   */
  readonly #matches = new RecordCache<readonly MatchRef[]>();

  readonly #orgVersionBytes: number;
  readonly #versionBytes: OrgVersionBytes;
  readonly #createKeys: WorkflowCreateKeys;
  /** Deleted workflows whose versions and secrets are still kept. */
  readonly deleted: DeletedWorkflows;

  constructor(ledger: Ledger, limits: Partial<WorkflowStoreLimits> = {}) {
    this.#pinned = new PinnedVersions(limits.pinnedCache ?? PINNED_CACHE);
    this.#orgVersionBytes = limits.orgVersionBytes ?? MAX_VERSION_BYTES_PER_ORG;
    this.#root = ledger.root;
    this.#workflows = ledger.openDatabase('workflows');
    this.#versions = ledger.openDatabase('workflow-versions');
    this.#triggers = new TriggerIndex(ledger.openDatabase('workflow-triggers'), this.#workflows, (orgId, workflowId, version) => this.version(orgId, workflowId, version), {
      bytes: limits.triggerBytes ?? MAX_TRIGGER_BYTES,
      workflows: limits.triggerWorkflows ?? MAX_WORKFLOWS_PER_TRIGGER,
    });
    this.#secrets = ledger.openDatabase('workflow-secrets');
    this.#order = ledger.openDatabase(WORKFLOW_ORDER);
    this.#createKeys = new WorkflowCreateKeys(ledger);
    this.#versionBytes = new OrgVersionBytes(ledger.openDatabase('workflow-org-bytes'), this.#versions);
    this.deleted = new DeletedWorkflows(ledger, { workflows: this.#workflows, versions: this.#versions, secrets: this.#secrets }, this.#versionBytes);
  }

  /** How many pinned versions are held decoded, and their JSON size (at most PINNED_CACHE.maxBytes). */
  get pinnedHeld(): { readonly versions: number; readonly bytes: number } {
    return this.#pinned.held;
  }

  get(orgId: string, workflowId: string): Workflow | undefined {
    if (!isWorkflowId(workflowId)) return undefined;
    return this.#workflows.get([orgId, workflowId]) as Workflow | undefined;
  }

  /** A pinned version; still readable after the workflow is updated or deleted. */
  version(orgId: string, workflowId: string, version: number): WorkflowVersion | undefined {
    if (!isWorkflowId(workflowId) || !Number.isSafeInteger(version) || version < 1) return undefined;
    return this.#pinned.read(orgId, workflowId, version, () => this.#versions.get([orgId, workflowId, version]) as WorkflowVersion | undefined);
  }

  /** A version as stored, not kept among the pinned ones held decoded: for a walk over every version of an org (the export). */
  uncachedVersion(orgId: string, workflowId: string, version: number): WorkflowVersion | undefined {
    return this.#versions.get([orgId, workflowId, version]) as WorkflowVersion | undefined;
  }

  /** The newest version of a workflow (deleted ones too); the `return` inside the loop closes the range. */
  newestVersion(orgId: string, workflowId: string): WorkflowVersion | undefined {
    for (const version of this.versions(orgId, workflowId)) return version;
    return undefined;
  }

  /**
   * Versions of one workflow, newest first, strictly below `before` if given; read one at a time (a
   * version can be megabytes). Iterate it to its end or leave it with `break`/`return`, which closes
   * the range: a generator left paused holds an LMDB read transaction (a reader slot) for good.
   */
  *versions(orgId: string, workflowId: string, before?: number): Generator<WorkflowVersion> {
    if (!isWorkflowId(workflowId)) return;
    const top = before === undefined ? Number.MAX_SAFE_INTEGER : before - 1;
    if (top < 1) return;
    for (const { value } of this.#versions.getRange({ start: [orgId, workflowId, top], end: [orgId, workflowId, 0], reverse: true })) yield value as WorkflowVersion;
  }

  /**
   * The workflows of one environment, newest created first (ties by id, descending), after the
   * one `after` names ([created_at, id]), read one at a time: a page reads only what it shows.
   */
  *newestFirst(orgId: string, environment: WorkflowEnvironment, after?: readonly [string, string]): Generator<Workflow> {
    const start = after === undefined ? [orgId, environment, HIGH] : [orgId, environment, after[0], after[1]];
    for (const key of this.#order.getKeys({ start, end: [orgId, environment, ''], reverse: true }) as Iterable<[string, string, string, string]>) {
      if (after !== undefined && key[2] === after[0] && key[3] === after[1]) continue;
      const workflow = this.#workflows.get([orgId, key[3]]) as Workflow | undefined;
      if (workflow !== undefined) yield workflow;
    }
  }

  /**
   * Writes the ordering entry of every stored workflow (data written before it existed); resolves
   * with how many, once durable. Idempotent. Boot calls it for a data dir stamped below WORKFLOW_ORDER_FORMAT.
   */
  async indexOrder(passSize = 1000): Promise<number> {
    return passesOverTable(this.#root, this.#workflows, passSize, (_key, value) => value as Workflow, (workflow) => this.#order.put(orderKey(workflow), 1));
  }

  /**
   * Enabled workflows of (org, environment) whose trigger_event equals `eventType`, each as its
   * current version (frozen, shared). Only reads, so it is safe inside the ingest write transaction.
   * Cached, and exact in ledger order: while a workflow write of the org is in progress the answer
   * comes from the ledger (see record-cache.ts).
   */
  matching(orgId: string, environment: string, eventType: string): readonly WorkflowVersion[] {
    const refs = this.#matches.read(orgId, `${environment}\u0000${eventType}`, () => this.#triggers.matches(orgId, environment, eventType)) ?? [];
    if (refs.length === 0) return NO_MATCHES;
    const matches: WorkflowVersion[] = [];
    for (const ref of refs) {
      const version = isVersionRef(ref) ? this.version(orgId, ref[0], ref[1]) : ref;
      if (version !== undefined) matches.push(version);
    }
    return matches;
  }

  /** Active Standard Webhooks signing secrets, newest first (two during a rotation); [] if unknown. */
  signingSecrets(orgId: string, workflowId: string): readonly string[] {
    if (!isWorkflowId(workflowId)) return [];
    return (this.#secrets.get([orgId, workflowId]) as SigningSecretsRecord | undefined)?.secrets ?? [];
  }

  /**
   * Stores version 1, its trigger entry and a fresh signing secret in one transaction; resolves
   * after it is durable. 409 `workflow_limit_reached` past MAX_WORKFLOWS_PER_ORG. With an
   * idempotency key that already created a workflow here, writes nothing and answers that one as it
   * is now (`earlier`), with its newest signing secret; the caller compares what was asked for.
   */
  async create(draft: WorkflowDraft, orgId: string, at: number, idempotencyKey?: string): Promise<CreatedWorkflow> {
    const workflow = nextWorkflow(draft, { orgId: asOrgId(orgId), workflowId: asWorkflowId(randomUUID()), at });
    const signingSecret = newSigningSecret();
    const outcome = await this.#write(orgId, (): Outcome<CreatedWorkflow> => {
      // Looked up in the transaction: of two requests with one key at once one creates, and the
      // other answers only once that workflow is on disk (this write's flush).
      const madeId = idempotencyKey === undefined ? undefined : this.#createKeys.workflowOf(orgId, idempotencyKey);
      const made = madeId === undefined ? undefined : this.get(orgId, madeId);
      if (made !== undefined) return { ok: true, value: { workflow: made, signingSecret: this.signingSecrets(orgId, made.id)[0] ?? '', earlier: true } };
      const count = this.#workflows.getKeysCount({ start: [orgId], end: [orgId, HIGH] });
      if (count >= MAX_WORKFLOWS_PER_ORG) return { ok: false, reason: 'limit' };
      const refused = this.#putVersion(workflow, undefined);
      if (refused !== undefined) return refused;
      this.#order.put(orderKey(workflow), 1);
      this.#secrets.put([orgId, workflow.id], { secrets: [signingSecret], updated_at: workflow.created_at } satisfies SigningSecretsRecord);
      if (idempotencyKey !== undefined) this.#createKeys.putWithin(orgId, idempotencyKey, workflow.id);
      return { ok: true, value: { workflow, signingSecret, earlier: false } };
    });
    return unwrap(outcome, workflow.id);
  }

  /**
   * Stores `draft` as the next version (previous versions stay readable) and moves the trigger
   * entry with it; resolves after it is durable. 404 if the workflow is gone; 409 if `ifVersion`
   * is given and another write got there first.
   */
  async update(orgId: string, workflowId: string, draft: WorkflowDraft, at: number, options: UpdateOptions = {}): Promise<Workflow> {
    return unwrap(
      await this.#write(orgId, (): Outcome<Workflow> => {
        const previous = this.get(orgId, workflowId);
        if (previous === undefined) return { ok: false, reason: 'missing' };
        if (options.ifVersion !== undefined && previous.version !== options.ifVersion) return { ok: false, reason: 'conflict', current: previous.version };
        // An update that only disables goes through at the cap, as setStatus's disable does.
        const onlyDisables = draft.status === 'disabled' && isDeepStrictEqual(draft, { ...toWorkflowVersion(previous).definition, status: 'disabled' });
        // Checked here, in the transaction: concurrent disables at the cap write one version, not one each.
        if (onlyDisables && previous.status === 'disabled') return { ok: true, value: previous };
        if (previous.version >= MAX_VERSIONS_PER_WORKFLOW && !onlyDisables) return { ok: false, reason: 'versions' };
        const next = nextWorkflow(draft, { orgId: previous.org_id, workflowId: previous.id, at, previous });
        return this.#putVersion(next, previous, onlyDisables) ?? { ok: true, value: next };
      }),
      workflowId,
    );
  }

  /**
   * Enables or disables; a change is a new version like any update. Setting the status it already
   * has writes nothing and returns the workflow as is, so a repeated toggle is harmless.
   */
  async setStatus(orgId: string, workflowId: string, status: WorkflowStatus, at: number): Promise<Workflow> {
    return unwrap(
      await this.#write(orgId, (): Outcome<Workflow> => {
        const previous = this.get(orgId, workflowId);
        if (previous === undefined) return { ok: false, reason: 'missing' };
        if (previous.status === status) return { ok: true, value: previous };
        // Disabling always works, so a misbehaving workflow can be stopped at the cap (one version more at most).
        if (status === 'enabled' && previous.version >= MAX_VERSIONS_PER_WORKFLOW) return { ok: false, reason: 'versions' };
        const next = nextWorkflow({ ...toWorkflowVersion(previous).definition, status }, { orgId: previous.org_id, workflowId: previous.id, at, previous });
        return this.#putVersion(next, previous, status === 'disabled') ?? { ok: true, value: next };
      }),
      workflowId,
    );
  }

  /**
   * Removes the workflow and its trigger entry (no new run will pin it); keeps versions and secrets,
   * and lists it in `deleted`, which removes them once no run names it (deleted-workflows.ts).
   */
  async delete(orgId: string, workflowId: string, at: number): Promise<void> {
    unwrap(
      await this.#write(orgId, (): Outcome<null> => {
        const current = this.get(orgId, workflowId);
        if (current === undefined) return { ok: false, reason: 'missing' };
        this.#workflows.remove([orgId, current.id]);
        this.#triggers.removeWithin(current);
        this.#order.remove(orderKey(current));
        this.#createKeys.removeWithin(orgId, current.id);
        this.deleted.markWithin(orgId, current.id, at);
        return { ok: true, value: null };
      }),
      workflowId,
    );
  }

  /**
   * Mints a new secret that signs first; the previous newest keeps signing, older ones are dropped.
   * With `key` (Idempotency-Key) naming the rotation that made a secret that still signs (the
   * newest or the previous), writes nothing and answers that secret (`earlier`): a retried
   * rotation must not end the previous secret's grace. One naming a rotation whose secret was
   * dropped since is refused (409 rotation_superseded), writing nothing.
   */
  async rotateSigningSecret(orgId: string, workflowId: string, at: number, key?: string): Promise<{ signingSecret: string; earlier: boolean }> {
    const fresh = newSigningSecret();
    return unwrap(
      await this.#write(orgId, (): Outcome<{ signingSecret: string; earlier: boolean }> => {
        const current = this.get(orgId, workflowId);
        if (current === undefined) return { ok: false, reason: 'missing' };
        const stored = this.#secrets.get([orgId, current.id]) as SigningSecretsRecord | undefined;
        const earlier = earlierRotation(stored, key);
        if (earlier === 'superseded') return { ok: false, reason: 'superseded' };
        if (earlier !== undefined) return { ok: true, value: { signingSecret: earlier.secret, earlier: true } };
        this.#secrets.put([orgId, current.id], rotatedRecord(stored, rotateSecrets(stored?.secrets ?? [], fresh), key, at));
        return { ok: true, value: { signingSecret: fresh, earlier: false } };
      }),
      workflowId,
    );
  }

  /**
   * Writes `next` as current, adds its version record and keeps the trigger index in step. In a
   * transaction. Writes nothing, and says by how much, if `next` is enabled and its trigger's
   * enabled workflows would outgrow their caps (a version that grows nothing goes through: one
   * already enabled there does not count again), or the org's versions would outgrow their bytes
   * (`onlyDisables`, a version that changes nothing but disabling, goes through: stopping one always
   * works; one that also changes the definition does not, or it would carry any size past the cap).
   */
  #putVersion(next: Workflow, previous: Workflow | undefined, onlyDisables = false): VersionRefused | undefined {
    const version = toWorkflowVersion(next);
    const size = versionSize(version);
    const used = this.#versionBytes.used(next.org_id);
    if (!onlyDisables && used + size > this.#orgVersionBytes) {
      return { ok: false, reason: 'storage', overflow: { limit: this.#orgVersionBytes, used, size } };
    }
    const overflow = this.#triggers.overflow(next, size);
    if (overflow !== undefined) return { ok: false, reason: 'trigger', overflow };
    this.#versionBytes.add(next.org_id, size);
    this.#workflows.put([next.org_id, next.id], next);
    this.#versions.put([next.org_id, next.id, next.version], version);
    this.#pinned.writtenWithin(next.org_id, next.id, next.version);
    this.#triggers.moveWithin(previous, next, size);
    return undefined;
  }

  /** Every write of this store: one durable transaction on `orgId`'s records. */
  #write<T>(orgId: string, body: () => Outcome<T>): Promise<Outcome<T>> {
    // The pinned cache keeps none of the versions the body writes until the transaction settles.
    return this.#pinned.writing(body, (tracked) => this.#matches.writing(orgId, () => durably(this.#root, this.#root.transaction(tracked))));
  }
}

// A workflow's environment and created_at never change, so its entry is written once and removed with it.
const orderKey = (workflow: Workflow): [string, string, string, string] => [workflow.org_id, workflow.environment, workflow.created_at, workflow.id];

/** The table ordering workflows by creation (WorkflowStore.newestFirst). */
export const WORKFLOW_ORDER = 'workflow-order';
/** The data format (data-format.ts) from which on every workflow has its ordering entry. */
export const WORKFLOW_ORDER_FORMAT = 3;
