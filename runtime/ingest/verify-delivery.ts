// Picks the verifier for a source's scheme; the one entry point ingest calls.
// Verification always runs over the exact raw bytes, before the body is parsed.

import type { SourceHead } from '../sources/source-record.ts';
import type { VerifiedDelivery } from './verification.ts';
import { verifyGithub } from './verify-github.ts';
import { verifyStandardWebhook } from './verify-standard-webhooks.ts';
import { verifyStripe } from './verify-stripe.ts';

export function verifyDelivery(source: Pick<SourceHead, 'scheme' | 'secrets'>, headers: Readonly<Record<string, string>>, body: Buffer, nowMs: number): VerifiedDelivery {
  switch (source.scheme) {
    case 'standard-webhooks':
      return verifyStandardWebhook(headers, body, source.secrets, nowMs);
    case 'stripe':
      return verifyStripe(headers, body, source.secrets, nowMs);
    case 'github':
      return verifyGithub(headers, body, source.secrets);
  }
}
