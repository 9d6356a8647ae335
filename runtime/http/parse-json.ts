// Parses a request body as JSON: 415 for other content types, 400 for malformed bytes, and for an
// API body, 400 for a string that is not Unicode text (validation/lone-surrogate.ts).
// Returns `unknown`; a body parser (validation/body-schema.ts) turns it into a typed value.

import { shownName } from '../validation/shown-name.ts';
import { InputError } from '../errors.ts';
import { duplicateKeyAt } from '../validation/duplicate-keys.ts';
import { loneSurrogatePath } from '../validation/lone-surrogate.ts';
import { MAX_JSON_NESTING, nestsDeeperThan } from '../validation/json-nesting.ts';
import type { HttpRequest } from './types.ts';

export function isJsonContentType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const mediaType = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  return mediaType === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(mediaType);
}

// Stateless between calls (no `stream` option), so one instance serves every request.
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * Decodes UTF-8 strictly and parses JSON nested at most MAX_JSON_NESTING deep, with no member named
 * twice in one object; returns the value and the text it was parsed from. `what` names the
 * document in error messages.
 */
export function decodeJsonBytes(body: Buffer, what = 'The request body'): { readonly value: unknown; readonly text: string } {
  const text = decodeUtf8(body, what);
  return { value: readJsonText(text, what), text };
}

/** Decodes UTF-8 strictly: 400 `malformed_json` for bytes that are not UTF-8. */
export function decodeUtf8(body: Buffer, what = 'The request body'): string {
  try {
    return strictUtf8.decode(body);
  } catch {
    throw new InputError(400, 'malformed_json', `${what} is not valid UTF-8 (JSON is always UTF-8, RFC 8259, whatever charset a Content-Type names).`);
  }
}

/**
 * Parses JSON text nested at most MAX_JSON_NESTING deep, with no member named twice in one object
 * (400 otherwise). Pure computation, so a thread may do it for the event loop (read-webhook-body.ts).
 */
export function readJsonText(text: string, what = 'The request body'): unknown {
  if (nestsDeeperThan(text)) {
    throw new InputError(400, 'json_too_deep', `${what} nests objects and arrays more than ${MAX_JSON_NESTING} levels deep.`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (error) {
    // Only the position: V8's message quotes the text around the error, which may be a secret.
    const position = error instanceof Error ? /at position (\d+)/.exec(error.message)?.[1] : undefined;
    throw new InputError(400, 'malformed_json', `${what} is not valid JSON${position === undefined ? '' : ` (at position ${position})`}.`);
  }
  const duplicate = duplicateKeyAt(text);
  if (duplicate >= 0) throw new InputError(400, 'duplicate_json_member', `${what} names a member twice in one object (at position ${duplicate}).`);
  return value;
}

/** Decodes UTF-8 strictly and parses JSON; never returns a half-parsed value. */
export function parseJsonBytes(body: Buffer): unknown {
  return decodeJsonBytes(body).value;
}

export function parseJsonRequest(request: HttpRequest): unknown {
  return parseJsonRequestText(request).value;
}

/** As parseJsonRequest, with the text the value was parsed from. */
export function parseJsonRequestText(request: HttpRequest): { readonly value: unknown; readonly text: string } {
  assertJsonRequest(request);
  const parsed = decodeJsonBytes(request.body);
  return { value: refuseLoneSurrogates(parsed.value, parsed.text), text: parsed.text };
}

/** A request's Content-Type is JSON's (415 otherwise) and its body not empty (400). */
export function assertJsonRequest(request: HttpRequest): void {
  if (!isJsonContentType(request.headers['content-type'])) {
    throw new InputError(415, 'unsupported_media_type', 'The request body must be JSON (Content-Type: application/json).');
  }
  if (request.body.length === 0) throw new InputError(400, 'malformed_json', 'The request body is empty; a JSON document is required.');
}

/** An API body's text, checked and parsed as parseJsonRequestText does its bytes (in a thread, for a large one). */
export function parseApiJsonText(text: string): unknown {
  return refuseLoneSurrogates(readJsonText(text), text);
}

/** `value` (parsed from `text`), unless it holds a lone UTF-16 surrogate: a 400 naming where (`what`: whose text it is). */
export function refuseLoneSurrogates(value: unknown, text: string, what = 'The request body'): unknown {
  // API bodies and device messages hold what Sluice stores as values (names, schemas, payloads):
  // only text. (Webhook bodies are stored as the exact text received, and are not checked this way.)
  // The strict UTF-8 decoder refuses encoded surrogates, so only a \uD800-\uDFFF escape can make
  // one: without such an escape in the text, the walk (which visits every value) is skipped.
  const surrogateAt = /\\u[dD][89a-fA-F]/.test(text) ? loneSurrogatePath(value) : undefined;
  if (surrogateAt !== undefined) {
    throw new InputError(400, 'invalid_unicode', `${what} holds a lone UTF-16 surrogate (a "\\uD800"-style escape without its pair) at ${surrogateAt}: strings must be Unicode text.`, { field: surrogateAt });
  }
  return value;
}

/**
 * For a POST that takes no options (resume, cancel, a reset, a rotation): no body, or an empty JSON
 * object, is fine; anything else is refused as another write refuses it (415, `malformed_json`,
 * `unknown_field`), so an option the endpoint does not have (`{"dry_run":true}`) never goes unheard.
 */
export function assertNoBodyFields(request: HttpRequest): void {
  if (request.body.length === 0) return;
  const { value } = parseJsonRequestText(request);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InputError(400, 'invalid_request', 'This endpoint takes no request body: send none, or {}.');
  }
  const [field] = Object.keys(value);
  if (field !== undefined) {
    const name = shownName(field);
    throw new InputError(400, 'unknown_field', `Field "${name}" is not a known field: this endpoint takes no request body (send none, or {}).`, { field: name });
  }
}
