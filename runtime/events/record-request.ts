// Builds the bounded recording of an ingest request: headers with secrets redacted, body capped.
// Recordings are evidence for support and transport replay; they must never hold a credential.

import type { Recording } from './event-record.ts';
import { textCutAt } from '../validation/cut-text.ts';

export const RECORDING_BODY_CAP = 64 * 1024;
const MAX_HEADERS = 64;
const MAX_HEADER_VALUE = 1024;
const REDACTED = new Set([
  'authorization',
  'cookie',
  'set-cookie',
  'proxy-authorization',
  'x-api-key',
  'webhook-signature',
  'stripe-signature',
  'x-hub-signature',
  'x-hub-signature-256',
  // Providers' signature headers whose names say so only in their own words.
  'x-trello-webhook',
  'plaid-verification',
]);
/** Names that say they carry a credential (x-gitlab-token, x-webhook-secret, x-auth-token, x-signing-key, x-shopify-hmac-sha256, x-pwd, paypal-transmission-sig, ...). */
const CREDENTIAL_NAME = /token|secret|signature|hmac|pass|pwd|auth|key|session|credential|(^|-)sig(-|$)/;
/**
 * Idempotency keys are no credentials: kept, since support matches a delivery with its sender's
 * retries by them. Only these two names: `x-secret-idempotency-key` says it is a secret.
 */
const IDEMPOTENCY_KEYS: ReadonlySet<string> = new Set(['idempotency-key', 'x-idempotency-key']);

const isCredential = (name: string): boolean => REDACTED.has(name) || (CREDENTIAL_NAME.test(name) && !IDEMPOTENCY_KEYS.has(name));

export function recordRequest(
  method: string,
  path: string,
  headers: Readonly<Record<string, string>>,
  body: Buffer,
  verifier: Recording['verifier'],
  receivedAt: string,
): Recording {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers).slice(0, MAX_HEADERS)) {
    kept[name] = isCredential(name) ? '[redacted]' : value.slice(0, MAX_HEADER_VALUE);
  }
  const truncated = body.length > RECORDING_BODY_CAP;
  return {
    method,
    path,
    headers: kept,
    body: textCutAt(body, RECORDING_BODY_CAP),
    body_bytes: body.length,
    body_truncated: truncated,
    verifier,
    received_at: receivedAt,
  };
}
