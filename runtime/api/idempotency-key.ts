// The `Idempotency-Key` header as the API reads it, on business replays, POST /events, POST
// /workflows and signing-secret rotations: one rule for all, so a client can use one key scheme across the API.

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
