// The Standard Webhooks signing secrets of a workflow: minting one and the rotation rule.
// Pure apart from the randomness in `newSigningSecret`; the store persists the result.

import { randomBytes } from 'node:crypto';

/** Active secrets during a rotation: the new one signs first, the previous one still signs. */
export const MAX_ACTIVE_SIGNING_SECRETS = 2;
export const SIGNING_SECRET_BYTES = 32;

/** The stored record under [orgId, workflowId]: newest first, never empty once created. */
export interface SigningSecretsRecord {
  readonly secrets: readonly string[];
  /** When the list last changed (creation or rotation), ISO-8601. */
  readonly updated_at: string;
  /**
   * The Idempotency-Key of the rotation that made the newest secret, if it was sent with one: the
   * same rotation sent again (its answer lost) answers that secret instead of rotating again, which
   * would drop the secret receivers still verify with.
   */
  readonly rotation_key?: string;
  /** The Idempotency-Key of the rotation that made the previous secret (secrets[1]), which still signs. */
  readonly previous_rotation_key?: string;
  /**
   * Keys of rotations whose secrets a later rotation dropped, newest first, at most
   * SUPERSEDED_KEYS_KEPT: such a rotation sent again is refused, not made again.
   */
  readonly superseded_rotation_keys?: readonly string[];
}

/** How many keys of rotations whose secrets were dropped a record keeps. */
export const SUPERSEDED_KEYS_KEPT = 16;

/**
 * What a rotation keyed `key` is, given the record: the rotation that made the newest or the
 * previous secret (answered with it, nothing written), one whose secret was dropped since
 * (`superseded`: refused), or a new one.
 */
export function earlierRotation(stored: SigningSecretsRecord | undefined, key: string | undefined): { readonly secret: string } | 'superseded' | undefined {
  if (key === undefined || stored === undefined) return undefined;
  const [newest, previous] = stored.secrets;
  if (stored.rotation_key === key && newest !== undefined) return { secret: newest };
  if (stored.previous_rotation_key === key && previous !== undefined) return { secret: previous };
  return stored.superseded_rotation_keys?.includes(key) === true ? 'superseded' : undefined;
}

/** The record after a rotation keyed `key` (or not) that made `secrets` from `stored`'s. */
export function rotatedRecord(stored: SigningSecretsRecord | undefined, secrets: readonly string[], key: string | undefined, at: number): SigningSecretsRecord {
  // The previous secret's key goes with it: its secret is dropped now (MAX_ACTIVE_SIGNING_SECRETS).
  const superseded = [stored?.previous_rotation_key, ...(stored?.superseded_rotation_keys ?? [])].filter((k): k is string => k !== undefined).slice(0, SUPERSEDED_KEYS_KEPT);
  return {
    secrets,
    updated_at: new Date(at).toISOString(),
    ...(key === undefined ? {} : { rotation_key: key }),
    ...(stored?.rotation_key === undefined ? {} : { previous_rotation_key: stored.rotation_key }),
    ...(superseded.length === 0 ? {} : { superseded_rotation_keys: superseded }),
  };
}

/** `whsec_` + base64 of 32 random bytes: the format Standard Webhooks receivers expect. */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(SIGNING_SECRET_BYTES).toString('base64')}`;
}

/**
 * The active list after a rotation: `fresh` first, the previous newest second, anything older
 * dropped. Receivers verify against any `v1,` signature, so both sign until the next rotation.
 */
export function rotateSecrets(current: readonly string[], fresh: string): string[] {
  return [fresh, ...current].slice(0, MAX_ACTIVE_SIGNING_SECRETS);
}
