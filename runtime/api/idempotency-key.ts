// The `Idempotency-Key` header as the API reads it, on business replays, POST /events, POST
// /workflows and signing-secret rotations: one rule for all, so a client can use one key scheme across the API.
// Writes whose answer holds a secret shown once (an API key, a device token) refuse it: their answer
// cannot be given again, and ignoring the key made each retry mint another live credential.

import { InputError } from '../errors.ts';

/** An optional `Idempotency-Key` header: 1-255 printable ASCII characters, no spaces; else 400 invalid_idempotency_key. */
export function parseIdempotencyKey(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  // Header lines sent twice reach the API joined by ", " (which no key holds: it has a space).
  if (value.includes(', ')) {
    throw new InputError(400, 'invalid_idempotency_key', 'The Idempotency-Key header was sent more than once; send it once.', { field: 'Idempotency-Key' });
  }
  if (!/^[\x21-\x7e]{1,255}$/.test(value)) {
    throw new InputError(400, 'invalid_idempotency_key', 'The Idempotency-Key header must be 1-255 printable ASCII characters without spaces.', { field: 'Idempotency-Key' });
  }
  return value;
}

/**
 * 400 `idempotency_key_not_supported` when the request carries an `Idempotency-Key`: for a write
 * whose answer holds `secret`, which Sluice keeps only hashed and so cannot answer twice; `check`
 * says how to tell whether a first try whose answer was lost took.
 */
export function refuseIdempotencyKey(value: string | undefined, secret: string, check: string): void {
  if (value === undefined) return;
  throw new InputError(400, 'idempotency_key_not_supported', `This write cannot be retried safely: its answer holds ${secret}, shown once and kept only hashed, so a retry would make another. Send it without an Idempotency-Key; ${check}`, { field: 'Idempotency-Key' });
}
