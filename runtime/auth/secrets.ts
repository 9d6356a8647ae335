// Generation, hashing and constant-time comparison of bearer tokens (admin token, API keys).
// Keys are stored only as SHA-256 hashes; a presented key is hashed and looked up by that hash.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new random token with a readable prefix, e.g. `sk_live_…` for API keys. */
export function generateToken(prefix: string): string {
  return `${prefix}${randomBytes(24).toString('base64url')}`;
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** Compares two strings without leaking where they differ through timing. */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = createHash('sha256').update(a, 'utf8').digest();
  const right = createHash('sha256').update(b, 'utf8').digest();
  return timingSafeEqual(left, right) && a.length === b.length;
}
