// Parses a request body as JSON: 415 for other content types, 400 for malformed bytes.
// Returns `unknown`; a body parser (validation/body-schema.ts) turns it into a typed value.

import { InputError } from '../errors.ts';
import type { HttpRequest } from './types.ts';

export function isJsonContentType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const mediaType = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  return mediaType === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(mediaType);
}

/** Decodes UTF-8 strictly and parses JSON; never returns a half-parsed value. */
export function parseJsonBytes(body: Buffer): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(body);
  } catch {
    throw new InputError(400, 'malformed_json', 'The request body is not valid UTF-8.');
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    const detail = error instanceof Error ? error.message : 'parse error';
    throw new InputError(400, 'malformed_json', `The request body is not valid JSON: ${detail}.`);
  }
}

export function parseJsonRequest(request: HttpRequest): unknown {
  if (!isJsonContentType(request.headers['content-type'])) {
    throw new InputError(415, 'unsupported_media_type', 'The request body must be JSON (Content-Type: application/json).');
  }
  if (request.body.length === 0) throw new InputError(400, 'malformed_json', 'The request body is empty; a JSON document is required.');
  return parseJsonBytes(request.body);
}
