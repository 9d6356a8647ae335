// What a signature verifier returns and the errors it throws; shared by the three schemes.
// HMAC comparison is constant-time and tries every active key, so rotation never drops a delivery.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { InputError, SluiceError } from '../errors.ts';

export const TIMESTAMP_TOLERANCE_SECONDS = 300;
const MAX_ID_LENGTH = 256;
/**
 * Signatures one delivery may carry. Providers send one per active secret (a few while rotating);
 * every one is compared with every key, so an unsigned request with thousands of them cost the event
 * loop ~100x a normal one.
 */
export const MAX_SIGNATURES = 16;

/** The provider's own identity for a delivery; `eventType` may come later from the body. */
export interface VerifiedDelivery {
  readonly providerEventId: string | undefined;
  readonly eventType: string | undefined;
  /** Which active secret matched (its index), recorded as evidence, never the secret itself. */
  readonly keyIndex: number;
}

export const signatureError = (code: string, message: string): SluiceError => new SluiceError(401, code, message);

/** A header that only names the delivery (not part of what is signed) is missing or malformed: 400. */
export const headerError = (header: string, message: string): InputError =>
  new InputError(400, 'invalid_header', message, { field: `headers.${header}` });

/** A header the signature covers or carries is missing or malformed, so nothing can be verified: 401. */
export const signedHeaderError = (header: string, message: string): SluiceError =>
  new SluiceError(401, 'invalid_signature_header', message, { field: `headers.${header}` });

/**
 * On the event loop: ~0.6 ms per MiB per key on the dev VM (SHA extensions). WebCrypto's HMAC, which
 * runs on libuv's pool, was measured to cost the event loop as much for large bodies (it copies the
 * data into fresh memory per key, and page faults cost what hashing does), so it is not used.
 */
export function hmac(key: Buffer | string, data: Buffer[], encoding: 'base64' | 'hex'): string {
  const mac = createHmac('sha256', key);
  for (const part of data) mac.update(part);
  return mac.digest(encoding);
}

/** 401 `too_many_signatures` when `header` carries more than MAX_SIGNATURES signatures. */
export function assertSignatureCount(header: string, count: number): void {
  if (count > MAX_SIGNATURES) throw signatureError('too_many_signatures', `The ${header} header carries ${count} signatures; at most ${MAX_SIGNATURES} are accepted.`);
}

/**
 * Returns the index of the first key whose digest matches any presented signature, or -1; 401
 * `too_many_signatures` past MAX_SIGNATURES (`header` names where they came from). Digests are ASCII
 * (base64 or hex): a signature of another length cannot match and is not compared. Every key is
 * compared with every signature of its length, in constant time, whatever matched before.
 */
export function findMatchingKey(header: string, expectedPerKey: readonly (string | undefined)[], presented: readonly string[]): number {
  assertSignatureCount(header, presented.length);
  const candidates = presented.map((signature) => Buffer.from(signature, 'utf8'));
  let match = -1;
  expectedPerKey.forEach((expected, index) => {
    if (expected === undefined) return;
    const digest = Buffer.from(expected, 'utf8');
    for (const candidate of candidates) if (candidate.length === digest.length && timingSafeEqual(digest, candidate) && match === -1) match = index;
  });
  return match;
}

/**
 * Checks a unix-seconds timestamp against the injected clock (±300 s, in whole seconds as the
 * providers' own libraries do); `header` carries it, and `what` names it in messages (the header
 * itself, or the part of it that holds the timestamp).
 */
export function assertFreshTimestamp(header: string, value: string | undefined, nowMs: number, what = `The ${header} header`): number {
  if (value === undefined || value === '') throw signedHeaderError(header, `${what} is required.`);
  if (!/^\d{1,12}$/.test(value)) throw signedHeaderError(header, `${what} must be a unix timestamp in seconds.`);
  const seconds = Number(value);
  if (Math.abs(Math.floor(nowMs / 1000) - seconds) > TIMESTAMP_TOLERANCE_SECONDS) {
    throw signatureError('stale_timestamp', `${what} is more than ${TIMESTAMP_TOLERANCE_SECONDS} seconds away from now.`);
  }
  return seconds;
}

/** A provider delivery id, from a header or a body: 1-256 printable ASCII characters, no spaces. */
export const isDeliveryId = (value: string): boolean => value.length > 0 && value.length <= MAX_ID_LENGTH && /^[\x21-\x7e]+$/.test(value);

/** A provider delivery id from a header: printable ASCII, bounded; `fail` says whether the id is signed (401) or not (400). */
export function assertDeliveryId(header: string, value: string | undefined, fail = headerError): string {
  if (value === undefined || value === '') throw fail(header, `The ${header} header is required.`);
  if (!isDeliveryId(value)) {
    throw fail(header, `The ${header} header must be 1-${MAX_ID_LENGTH} printable ASCII characters without spaces.`);
  }
  return value;
}
