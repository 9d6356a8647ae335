// Stripe verification: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=…][,v0=…]`, HMAC-SHA256 with the
// secret used verbatim over `${t}.${rawBody}`; id and type come from the JSON body.

import { assertFreshTimestamp, findMatchingKey, hmac, signatureError, signedHeaderError, type VerifiedDelivery } from './verification.ts';

export function verifyStripe(
  headers: Readonly<Record<string, string>>,
  body: Buffer,
  secrets: readonly string[],
  nowMs: number,
): VerifiedDelivery {
  const header = headers['stripe-signature'];
  if (header === undefined || header.trim() === '') throw signatureError('missing_signature', 'The Stripe-Signature header is required.');
  let timestamp: string | undefined;
  const presented: string[] = [];
  for (const item of header.split(',')) {
    const separator = item.indexOf('=');
    if (separator <= 0) throw signedHeaderError('stripe-signature', 'The Stripe-Signature header must be a list of key=value pairs.');
    const key = item.slice(0, separator).trim();
    const value = item.slice(separator + 1).trim();
    if (key === 't') timestamp = value;
    else if (key === 'v1') presented.push(value.toLowerCase());
  }
  if (timestamp === undefined) throw signedHeaderError('stripe-signature', 'The Stripe-Signature header has no t= timestamp.');
  assertFreshTimestamp('stripe-signature', timestamp, nowMs, "The Stripe-Signature header's t= timestamp");
  if (presented.length === 0) throw signatureError('invalid_signature', 'The Stripe-Signature header has no v1 signature.');
  const prefix = Buffer.from(`${timestamp}.`, 'utf8');
  const expected = secrets.map((secret) => hmac(secret, [prefix, body], 'hex'));
  const keyIndex = findMatchingKey('Stripe-Signature', expected, presented);
  if (keyIndex < 0) throw signatureError('invalid_signature', 'No Stripe signature matches an active secret of this source.');
  return { providerEventId: undefined, eventType: undefined, keyIndex };
}
