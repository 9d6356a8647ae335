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
