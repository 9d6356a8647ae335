// Reads a webhook body as ingest needs it: its text (stored as the payload, byte for byte) and its
// facts (body-facts.ts). A body of THREAD_READ_BYTES or more is checked and parsed in the runtime's
// body-reading thread (schema-checks.ts): on the event loop that took ~30 ms per MiB, which every
// org waited on. A smaller one is read on the event loop, where a thread's round trip costs more.

import { InputError } from '../errors.ts';
import { LARGE_BODY_BYTES } from '../http/large-body-share.ts';
import { decodeJsonBytes, decodeUtf8 } from '../http/parse-json.ts';
import type { SchemaChecks } from '../sources/schema-checks.ts';
import { bodyFactsOf, type BodyFacts } from './body-facts.ts';

/** Bodies at least this large are read in a thread (routes that do are not held to large-body-share.ts). */
export const THREAD_READ_BYTES = LARGE_BODY_BYTES;

export interface ReadBody {
  readonly text: string;
  readonly facts: BodyFacts;
  /** The parsed body, when it was parsed on the event loop (a small one). */
  readonly parsed?: { readonly value: unknown };
}

/** Rejects as decodeJsonBytes would (400 for bytes that are not UTF-8 JSON within its rules). */
export async function readWebhookBody(body: Buffer, orgId: string, bodies: SchemaChecks): Promise<ReadBody> {
  if (body.length === 0) throw new InputError(400, 'malformed_json', 'The request body is empty; a JSON document is required.');
  if (body.length < THREAD_READ_BYTES) {
    const { value, text } = decodeJsonBytes(body);
    return { text, facts: bodyFactsOf(value), parsed: { value } };
  }
  // Decoding is native and fast; the thread gets the text, which is what is stored.
  const text = decodeUtf8(body);
  return { text, facts: await bodies.readBody(orgId, text) };
}
