// Standard Webhooks verification: `webhook-id`, `webhook-timestamp`, `webhook-signature`
// (space-separated `v1,<base64>`), HMAC-SHA256 over `${id}.${timestamp}.${rawBody}`.

import { decodeStandardSecret } from '../sources/source-record.ts';
import {
  assertDeliveryId,
  assertFreshTimestamp,
  assertSignatureCount,
  findMatchingKey,
  hmac,
  signatureError,
  signedHeaderError,
  type VerifiedDelivery,
} from './verification.ts';

export function verifyStandardWebhook(
  headers: Readonly<Record<string, string>>,
  body: Buffer,
  secrets: readonly string[],
  nowMs: number,
): VerifiedDelivery {
  const signatureHeader = headers['webhook-signature'];
  if (signatureHeader === undefined || signatureHeader.trim() === '') {
    throw signatureError('missing_signature', 'The webhook-signature header is required.');
  }
  const id = assertDeliveryId('webhook-id', headers['webhook-id'], signedHeaderError);
  const timestamp = headers['webhook-timestamp'];
  assertFreshTimestamp('webhook-timestamp', timestamp, nowMs);
  const entries = signatureHeader
    .split(/\s+/)
    // A header sent as several lines reaches us joined with ", ": that comma is no part of a signature.
    .map((entry) => entry.replace(/,+$/, ''))
    .filter((entry) => entry !== '');
  // Every entry counts, of any version: only v1 ones are compared, but the cap is on what was sent.
  assertSignatureCount('webhook-signature', entries.length);
  const presented = entries.filter((entry) => entry.startsWith('v1,')).map((entry) => entry.slice(3));
  if (presented.length === 0) throw signatureError('invalid_signature', 'The webhook-signature header has no v1 signature.');
  const prefix = Buffer.from(`${id}.${timestamp}.`, 'utf8');
  // A secret that is not base64 (never stored for this scheme) signs nothing: an empty key would be anyone's.
  const expected = secrets.map((secret) => {
    const key = decodeStandardSecret(secret);
    return key === undefined || key.length === 0 ? undefined : hmac(key, [prefix, body], 'base64');
  });
  const keyIndex = findMatchingKey('webhook-signature', expected, presented);
  if (keyIndex < 0) throw signatureError('invalid_signature', 'No webhook signature matches an active secret of this source.');
  return { providerEventId: id, eventType: undefined, keyIndex };
}
