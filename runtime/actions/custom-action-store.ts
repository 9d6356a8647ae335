// Durable storage of custom actions: metadata, immutable module versions and their review, and the
// one question the run engine asks (`resolveForRun`). Every write is one flushed LMDB transaction.
//
// Databases (every key starts with the org id):
//   custom-actions           [orgId, actionId]           -> CustomActionRecord
//   custom-action-versions   [orgId, actionId, version]  -> ActionVersionRecord
//   custom-action-modules    [orgId, digest]             -> the module's bytes (Buffer)
// A version's digest and permissions never change after it is written: a permissions edit is a new
// version that needs its own approval, so an approval binds exactly what the reviewer saw.
// Module bytes are kept per (org, digest), written in the transaction that records the version, so
// a hook-runner that lost a module can be given it again (module-restore.ts); versions that share a
// module (a permissions edit, the same file uploaded again) share one copy, counted once against
// the org's cap (module-storage.ts). Versions written before the runtime kept bytes have none until
// the same module is uploaded again. Nothing deletes actions, so nothing deletes their bytes either.

import type { Ledger, LedgerTable } from '../ledger/ledger.ts';
import { ConflictError, notFound, type SluiceError } from '../errors.ts';
import { nextUpdateStamp } from '../update-stamp.ts';
import { MAX_MODULE_BYTES_PER_ORG, ModuleStorage, type CompiledUpload } from './module-storage.ts';
import {
  describeCustomAction, isCustomActionId, newCustomActionId,
  type ActionVersionRecord, type CustomActionId, type CustomActionRecord, type CustomActionView, type ReviewDecision,
} from './custom-action-record.ts';
import { samePermissions } from './permissions.ts';

export { MAX_MODULE_BYTES_PER_ORG, type CompiledUpload } from './module-storage.ts';

/** Keeps the list answer (every action with every version) bounded. */
export const MAX_ACTIONS_PER_ORG = 500;
export const MAX_VERSIONS_PER_ACTION = 100;
const HIGH = '\uffff';

/** How a custom_action step may run the action now: only the APPROVED version, with the permissions as reviewed. */
export type ActionResolution =
  | { readonly kind: 'approved'; readonly version: number; readonly digest: string; readonly permissions: readonly string[] }
  | { readonly kind: 'missing' }
  | { readonly kind: 'not_approved'; readonly status: 'pending_review' | 'rejected' | 'revoked' }
  /** The version a run is pinned to was revoked: the run fails rather than move to another version. */
  | { readonly kind: 'revoked'; readonly version: number };

export interface CreateInput {
  readonly name: string;
  readonly description: string;
  readonly module: CompiledUpload;
  readonly permissions: readonly string[];
}

export interface VersionInput {
  readonly module: CompiledUpload;
  /** Omitted: the latest version's permissions carry over (and are reviewed again with the new module). */
  readonly permissions?: readonly string[];
  readonly name?: string;
  readonly description?: string;
}

export interface UpdateInput {
  readonly name?: string;
  readonly description?: string;
  readonly permissions?: readonly string[];
  /** Why the action as stored when the write runs must not be changed (an If-Match naming another), if it must not. */
  readonly refusal?: (stored: CustomActionRecord) => SluiceError | undefined;
}

export interface ReviewInput {
  readonly decision: ReviewDecision;
  readonly reason: string | null;
  /** Omitted: the newest version that is pending review. */
  readonly version?: number;
  readonly reviewer: string;
}

/** What a write changed: the action as it now is, and the version written (null when none was). */
export interface ActionChange {
  readonly action: CustomActionView;
  readonly version: ActionVersionRecord | null;
}

export interface StoreOptions {
  /** Injected for tests; defaults to `act_` + 16 random hex characters. */
  readonly newId?: () => CustomActionId;
  /** Module bytes an org may hold (MAX_MODULE_BYTES_PER_ORG; tests set less). */
  readonly maxModuleBytes?: number;
}

type Outcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: SluiceError };

const iso = (ms: number): string => new Date(ms).toISOString();
const missingAction = (): SluiceError => notFound('Custom action', 'action_id');
const fail = (error: SluiceError): Outcome<never> => ({ ok: false, error });

export class CustomActionStore {
  readonly #actions: LedgerTable;
  readonly #versions: LedgerTable;
  /** The modules' bytes and the cap on them; every write of this store runs through its `write`. */
  readonly #modules: ModuleStorage;
  readonly #newId: () => CustomActionId;

  constructor(ledger: Ledger, options: StoreOptions = {}) {
    this.#actions = ledger.openDatabase('custom-actions');
    this.#versions = ledger.openDatabase('custom-action-versions');
    this.#modules = new ModuleStorage(ledger, this.#versions, options.maxModuleBytes ?? MAX_MODULE_BYTES_PER_ORG);
    this.#newId = options.newId ?? newCustomActionId;
  }

  get(orgId: string, actionId: string): CustomActionRecord | undefined {
    if (!isCustomActionId(actionId)) return undefined;
    return this.#actions.get([orgId, actionId]) as CustomActionRecord | undefined;
  }

  /** Every version, oldest first. */
  versions(orgId: string, actionId: string): ActionVersionRecord[] {
    if (!isCustomActionId(actionId)) return [];
    const range = this.#versions.getRange({ start: [orgId, actionId, 0], end: [orgId, actionId, Number.MAX_SAFE_INTEGER] });
    return [...range].map(({ value }) => value as ActionVersionRecord);
  }

  version(orgId: string, actionId: string, version: number): ActionVersionRecord | undefined {
    if (!isCustomActionId(actionId) || !Number.isSafeInteger(version) || version < 1) return undefined;
    return this.#versions.get([orgId, actionId, version]) as ActionVersionRecord | undefined;
  }

  /**
   * The bytes of a module some version of this org's actions has (`digest`: lower-case hex sha256 as
   * recorded), as stored: the caller checks them against the digest. Undefined when no version
   * uploaded since the runtime kept bytes has that module.
   */
  moduleBytes(orgId: string, digest: string): Uint8Array | undefined {
    return this.#modules.bytes(orgId, digest);
  }

  describe(orgId: string, actionId: string): CustomActionView | undefined {
    const action = this.get(orgId, actionId);
    return action === undefined ? undefined : describeCustomAction(action, this.versions(orgId, action.id));
  }

  /** Every action of the org, in key order (the API pages them newest first); `versions` reads its versions. */
  list(orgId: string): CustomActionRecord[] {
    return [...this.#actions.getRange({ start: [orgId], end: [orgId, HIGH] })].map(({ value }) => value as CustomActionRecord);
  }

  /**
   * A version a run already ran (it pins it: later steps and retries keep it, see
   * custom-action-step.ts): usable while approved or superseded since; otherwise as resolveForRun.
   */
  resolveVersion(orgId: string, actionId: string, version: number): ActionResolution {
    const pinned = this.get(orgId, actionId) === undefined ? undefined : this.version(orgId, actionId, version);
    if (pinned !== undefined && (pinned.status === 'approved' || pinned.status === 'superseded')) {
      return { kind: 'approved', version: pinned.version, digest: pinned.digest, permissions: pinned.permissions };
    }
    if (pinned?.status === 'revoked') return { kind: 'revoked', version: pinned.version };
    return this.resolveForRun(orgId, actionId);
  }

  /** Reads only; safe inside another write transaction (the run engine may call it there). */
  resolveForRun(orgId: string, actionId: string): ActionResolution {
    const action = this.get(orgId, actionId);
    if (action === undefined) return { kind: 'missing' };
    if (action.approved_version !== null) {
      const approved = this.version(orgId, action.id, action.approved_version);
      if (approved !== undefined && approved.status === 'approved') {
        return { kind: 'approved', version: approved.version, digest: approved.digest, permissions: approved.permissions };
      }
    }
    const versions = this.versions(orgId, action.id);
    if (versions.some((version) => version.status === 'pending_review')) return { kind: 'not_approved', status: 'pending_review' };
    // Nothing approved or pending: the newest version was rejected or revoked.
    return { kind: 'not_approved', status: versions.at(-1)?.status === 'revoked' ? 'revoked' : 'rejected' };
  }

  /**
   * Throws the 409 `create` (or, with `actionId`, `addVersion`) would answer now: called before an
   * upload is compiled, since the runner stores every module it compiles for good.
   */
  assertRoom(orgId: string, upload: Pick<CompiledUpload, 'digest' | 'size'>, actionId?: string): void {
    if (actionId === undefined) {
      if (this.#actionCount(orgId) >= MAX_ACTIONS_PER_ORG) throw actionLimit();
    } else {
      const latest = this.versions(orgId, actionId).at(-1);
      if (latest !== undefined && latest.version >= MAX_VERSIONS_PER_ACTION) throw versionLimit();
    }
    const full = this.#modules.refusal(orgId, upload, false);
    if (full !== undefined) throw full;
  }

  #actionCount(orgId: string): number {
    return this.#actions.getKeysCount({ start: [orgId], end: [orgId, HIGH] });
  }

  /** Stores the action and its version 1 (`pending_review`) in one transaction; resolves once durable. */
  async create(orgId: string, input: CreateInput, at: number): Promise<CustomActionView> {
    const id = this.#newId();
    const outcome = await this.#write((): Outcome<CustomActionView> => {
      if (this.#actionCount(orgId) >= MAX_ACTIONS_PER_ORG) return fail(actionLimit());
      const full = this.#modules.refusal(orgId, input.module, true);
      if (full !== undefined) return fail(full);
      if (this.#actions.doesExist([orgId, id])) return fail(new ConflictError('custom_action_exists', 'A custom action with this id already exists.'));
      const action: CustomActionRecord = { id, name: input.name, description: input.description, created_at: iso(at), updated_at: iso(at), approved_version: null };
      const version = pendingVersion(1, input.module, input.permissions, at);
      this.#actions.put([orgId, id], action);
      this.#versions.put([orgId, id, 1], version);
      this.#modules.put(orgId, input.module);
      return { ok: true, value: describeCustomAction(action, [version]) };
    });
    return unwrap(outcome);
  }

  /** Adds the next version (`pending_review`); the approved version keeps running until this one is approved. */
  async addVersion(orgId: string, actionId: string, input: VersionInput, at: number): Promise<ActionChange> {
    return unwrap(
      await this.#write((): Outcome<ActionChange> => {
        const action = this.get(orgId, actionId);
        const latest = action === undefined ? undefined : this.versions(orgId, action.id).at(-1);
        if (action === undefined || latest === undefined) return fail(missingAction());
        if (latest.version >= MAX_VERSIONS_PER_ACTION) return fail(versionLimit());
        const full = this.#modules.refusal(orgId, input.module, true);
        if (full !== undefined) return fail(full);
        const version = pendingVersion(latest.version + 1, input.module, input.permissions ?? latest.permissions, at);
        this.#modules.put(orgId, input.module);
        return { ok: true, value: this.#putChange(orgId, action, { name: input.name, description: input.description }, version, at) };
      }),
    );
  }

  /**
   * Renames or re-describes in place. New permissions become a new version, pending review, of the
   * latest version's module; the same set as the latest writes no version. A module whose code stands
   * rejected or revoked (moduleRefusal) is refused (409 module_rejected): a permissions edit must never
   * put such code up for a review that looks like a permission change. To try that module again,
   * upload it again, on purpose.
   */
  async update(orgId: string, actionId: string, input: UpdateInput, at: number): Promise<ActionChange> {
    return unwrap(
      await this.#write((): Outcome<ActionChange> => {
        const action = this.get(orgId, actionId);
        const versions = action === undefined ? [] : this.versions(orgId, action.id);
        const latest = versions.at(-1);
        if (action === undefined || latest === undefined) return fail(missingAction());
        const refused = input.refusal?.(action);
        if (refused !== undefined) return fail(refused);
        let version: ActionVersionRecord | null = null;
        if (input.permissions !== undefined && !samePermissions(input.permissions, latest.permissions)) {
          const rejected = moduleRefusal(versions, latest.digest);
          if (rejected !== undefined) {
            return fail(new ConflictError('module_rejected', `The latest module was ${rejected.status} in version ${rejected.version}; upload a module (the same one again, if you mean it) with the permissions it needs, in the upload's permissions field, instead of changing them here.`, { version: rejected.version }));
          }
          if (latest.version >= MAX_VERSIONS_PER_ACTION) return fail(versionLimit());
          version = pendingVersion(latest.version + 1, latest, input.permissions, at);
        }
        return { ok: true, value: this.#putChange(orgId, action, { name: input.name, description: input.description }, version, at) };
      }),
    );
  }

  /**
   * Approves or rejects one version that is pending review (409 `version_not_pending` otherwise).
   * Approving makes it the approved version and supersedes the previous approved one and every
   * older version still pending, in the same transaction. Revoking takes an approved or superseded
   * version's module out of use (409 `version_not_revocable` otherwise), in every version that has
   * it: the action has no approved version if it was that module, and runs pinned to one fail.
   */
  async review(orgId: string, actionId: string, input: ReviewInput, at: number): Promise<ActionChange> {
    return unwrap(
      await this.#write((): Outcome<ActionChange> => {
        const action = this.get(orgId, actionId);
        if (action === undefined) return fail(missingAction());
        const versions = this.versions(orgId, action.id);
        const target = input.version === undefined
          ? versions.findLast((version) => version.status === 'pending_review')
          : versions.find((version) => version.version === input.version);
        if (target === undefined) {
          return fail(input.version === undefined
            ? new ConflictError('no_pending_version', 'No version of this custom action is pending review.')
            : notFound(`Version ${input.version} of this custom action`, 'version'));
        }
        const revoking = input.decision === 'revoked';
        if (revoking ? target.status !== 'approved' && target.status !== 'superseded' : target.status !== 'pending_review') {
          const rule = revoking ? 'only an approved or superseded version can be revoked' : 'only a version pending review can be reviewed';
          return fail(new ConflictError(revoking ? 'version_not_revocable' : 'version_not_pending', `Version ${target.version} is ${target.status}; ${rule}.`, {
            version: target.version,
            status: target.status,
          }));
        }
        const revocation = { by: input.reviewer, reason: input.reason, at: iso(at) };
        const reviewed: ActionVersionRecord = revoking
          ? { ...target, status: 'revoked', revoked: revocation }
          : { ...target, status: input.decision, reviewer: input.reviewer, reason: input.reason, reviewed_at: iso(at) };
        /** Rejects the other versions of the target's module still pending review (a permission edit of it), saying why. */
        const rejectPendingOfModule = (verdict: 'revoked' | 'rejected'): void => {
          for (const version of versions) {
            if (version.digest !== target.digest || version.version === target.version || version.status !== 'pending_review') continue;
            this.#versions.put([orgId, action.id, version.version], { ...version, status: 'rejected', reviewer: input.reviewer, reason: `its module was ${verdict} in version ${target.version}`, reviewed_at: iso(at) });
          }
        };
        if (revoking) {
          // What is revoked is the module: the target and every other version of it (a permission
          // edit), in use or waiting for review, or it would come back looking like a permission change.
          for (const version of versions) {
            if (version.digest === target.digest && (version.status === 'approved' || version.status === 'superseded')) {
              this.#versions.put([orgId, action.id, version.version], { ...version, status: 'revoked', revoked: revocation });
            }
          }
          rejectPendingOfModule('revoked');
        } else {
          this.#versions.put([orgId, action.id, target.version], reviewed);
          // A rejection that stands against the code (no version of it approved, moduleRefusal)
          // rejects its other pending versions too, as a revocation does: approving one would run
          // the rejected code under the look of a permission change.
          const after = versions.map((version) => (version.version === target.version ? reviewed : version));
          if (input.decision === 'rejected' && moduleRefusal(after, target.digest) !== undefined) rejectPendingOfModule('rejected');
        }
        let next: CustomActionRecord = { ...action, updated_at: nextUpdateStamp(action.updated_at, at) };
        if (input.decision === 'approved') {
          for (const version of versions) {
            const older = version.version < target.version && version.status === 'pending_review';
            if (version.status === 'approved' || older) this.#versions.put([orgId, action.id, version.version], { ...version, status: 'superseded' });
          }
          next = { ...next, approved_version: target.version };
        }
        const revokesApproved = revoking && versions.some((version) => version.version === action.approved_version && version.digest === target.digest);
        if (revokesApproved) next = { ...next, approved_version: null };
        this.#actions.put([orgId, action.id], next);
        return { ok: true, value: { action: describeCustomAction(next, this.versions(orgId, action.id)), version: reviewed } };
      }),
    );
  }

  /** Writes metadata changes and an optional new version. In a transaction. */
  #putChange(
    orgId: string,
    action: CustomActionRecord,
    meta: { readonly name: string | undefined; readonly description: string | undefined },
    version: ActionVersionRecord | null,
    at: number,
  ): ActionChange {
    const next: CustomActionRecord = { ...action, name: meta.name ?? action.name, description: meta.description ?? action.description, updated_at: nextUpdateStamp(action.updated_at, at) };
    this.#actions.put([orgId, action.id], next);
    if (version !== null) this.#versions.put([orgId, action.id, version.version], version);
    return { action: describeCustomAction(next, this.versions(orgId, action.id)), version };
  }

  /** One flushed transaction, through the module storage, whose totals must hear of a write that failed. */
  #write<T>(body: () => Outcome<T>): Promise<Outcome<T>> {
    return this.#modules.write(body);
  }
}

/**
 * The version whose verdict on the module `digest` still stands against its code, if any: a
 * revocation, or a rejection while no version of that module was approved (a rejection after it
 * was approved is a verdict on that version's permissions, not on the code). A later approval of
 * the module, uploaded again on purpose, lifts either.
 */
function moduleRefusal(versions: readonly ActionVersionRecord[], digest: string): ActionVersionRecord | undefined {
  let refusal: ActionVersionRecord | undefined;
  let approved = false;
  for (const version of versions) {
    if (version.digest !== digest) continue;
    // A version still pending when a newer one was approved is superseded too, never reviewed (no reviewer).
    if (version.status === 'approved' || (version.status === 'superseded' && version.reviewer !== null)) {
      approved = true;
      refusal = undefined;
    } else if (version.status === 'revoked' || (version.status === 'rejected' && !approved)) {
      approved = false;
      refusal = version;
    }
  }
  return refusal;
}

function pendingVersion(version: number, module: Pick<CompiledUpload, 'digest' | 'size'>, permissions: readonly string[], at: number): ActionVersionRecord {
  return {
    version,
    digest: module.digest,
    size: module.size,
    permissions: [...permissions],
    status: 'pending_review',
    reviewer: null,
    reason: null,
    created_at: iso(at),
    reviewed_at: null,
  };
}

const actionLimit = (): SluiceError => new ConflictError('custom_action_limit_reached', `An organization can hold at most ${MAX_ACTIONS_PER_ORG} custom actions.`);

const versionLimit = (): SluiceError =>
  new ConflictError('version_limit_reached', `A custom action can hold at most ${MAX_VERSIONS_PER_ACTION} versions; create a new action instead.`);

function unwrap<T>(outcome: Outcome<T>): T {
  if (outcome.ok) return outcome.value;
  throw outcome.error;
}
