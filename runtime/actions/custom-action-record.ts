// The stored shapes of a custom action and its versions, their lifecycle, and the API view of both.
// Module bytes are never here, nor in any answer: the store keeps them in a table of their own
// (custom-action-store.ts), and the hook-runner its compiled copy under their digest (DESIGN 6.4).

import { createHash, randomBytes } from 'node:crypto';

export type CustomActionId = string & { readonly __brand: 'CustomActionId' };

/**
 * pending_review -> approved | rejected (by an admin); approved -> superseded when a newer version
 * is approved, which also supersedes older versions still pending (approvals only move forward);
 * approved or superseded -> revoked (by an admin: no run may use it again, even one pinned to it).
 */
export type VersionStatus = 'pending_review' | 'approved' | 'rejected' | 'superseded' | 'revoked';
export type ReviewDecision = 'approved' | 'rejected' | 'revoked';

/** [orgId, actionId] -> CustomActionRecord */
export interface CustomActionRecord {
  readonly id: CustomActionId;
  readonly name: string;
  readonly description: string;
  readonly created_at: string;
  readonly updated_at: string;
  /** The one version a custom_action step may run; null until an admin approves one. */
  readonly approved_version: number | null;
}

/** [orgId, actionId, version] -> ActionVersionRecord; only the status and the review and revocation fields ever change. */
export interface ActionVersionRecord {
  readonly version: number;
  /** Lower-case hex sha256 of the module, as the hook-runner compiled and stored it. */
  readonly digest: string;
  readonly size: number;
  /** What an approval binds: a run gets exactly these, never a later edit. */
  readonly permissions: readonly string[];
  readonly status: VersionStatus;
  /** The API key id of the admin who reviewed it (`platform_admin` for the platform token). */
  readonly reviewer: string | null;
  readonly reason: string | null;
  readonly created_at: string;
  readonly reviewed_at: string | null;
  /** Set when an admin revoked the version; the approval above stays on record. */
  readonly revoked?: { readonly by: string; readonly reason: string | null; readonly at: string };
}

export interface CustomActionView extends CustomActionRecord {
  readonly latest_version: number;
  /** Oldest first. */
  readonly versions: readonly ActionVersionRecord[];
}

const ACTION_ID = /^act_[0-9a-f]{16}$/;

export const isCustomActionId = (value: string): value is CustomActionId => ACTION_ID.test(value);

/** The digest a module is known by, here and in the hook-runner: sha256 of its bytes, in hex. */
export const moduleDigest = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** `act_` + 16 lower-case hex characters (64 random bits). */
export const newCustomActionId = (): CustomActionId => `act_${randomBytes(8).toString('hex')}` as CustomActionId;

export function describeCustomAction(action: CustomActionRecord, versions: readonly ActionVersionRecord[]): CustomActionView {
  return { ...action, latest_version: versions.at(-1)?.version ?? 0, versions };
}
