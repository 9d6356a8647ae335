// GitHub verification: `X-Hub-Signature-256: sha256=<hex>` over the raw body; the delivery id is
// `X-GitHub-Delivery` and the event type `X-GitHub-Event`. GitHub sends no timestamp.

import { EVENT_TYPE_REGEX, EVENT_TYPE_RULE } from '../sources/source-record.ts';
import { assertNotReservedType } from '../triggers/device-record.ts';
import { assertDeliveryId, findMatchingKey, headerError, hmac, signatureError, type VerifiedDelivery } from './verification.ts';

export function verifyGithub(headers: Readonly<Record<string, string>>, body: Buffer, secrets: readonly string[]): VerifiedDelivery {
  const header = headers['x-hub-signature-256'];
  if (header === undefined || header.trim() === '') throw signatureError('missing_signature', 'The X-Hub-Signature-256 header is required.');
  if (!header.startsWith('sha256=')) throw signatureError('invalid_signature', 'The X-Hub-Signature-256 header must start with "sha256=".');
  const providerEventId = assertDeliveryId('x-github-delivery', headers['x-github-delivery']);
  const eventType = headers['x-github-event'];
  if (eventType === undefined || eventType === '') throw headerError('x-github-event', 'The X-GitHub-Event header is required: it names the event type.');
  // The event type's own rule, here where the header can be named (ingest checks it again as `type`).
  if (!EVENT_TYPE_REGEX.test(eventType)) throw headerError('x-github-event', `The X-GitHub-Event header is not an event type. ${EVENT_TYPE_RULE}`);
  assertNotReservedType(eventType, 'headers.x-github-event');
  const expected = secrets.map((secret) => hmac(secret, [body], 'hex'));
  const keyIndex = findMatchingKey('X-Hub-Signature-256', expected, [header.slice('sha256='.length).toLowerCase()]);
  if (keyIndex < 0) throw signatureError('invalid_signature', 'The GitHub signature does not match an active secret of this source.');
  return { providerEventId, eventType, keyIndex };
}
