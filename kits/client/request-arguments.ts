// Arguments a REST call puts into its request line or headers, checked before anything is sent.
// encodeURIComponent leaves "." and ".." as they are, and URL resolution reads them as "this folder"
// and "the one above"; an empty id drops its segment: `/runs/` or `/runs/.` reached the run list,
// whose answer then read as a run. A header value outside visible ASCII is refused by fetch (after
// the retries of a keyed call, as a network error) or, for bytes above 0x7f at its ends, trimmed
// off by the server's HTTP parser, so two different idempotency keys would name one replay.

import { SluiceArgumentError } from './api-errors.ts';
import { headerValueProblem, problemWith, withoutEndSpace } from './credential-check.ts';

/** What a value that should have been text is, for a message: `null`, or its typeof. */
export const kindOf = (value: unknown): string => (value === null ? 'null' : typeof value);

/** `id` as one segment of a request path; throws SluiceArgumentError for one that names no record. */
export function pathId(what: string, id: string): string {
  // An unset variable would otherwise be sent as the text "undefined", and answered as a record not found.
  if (typeof id !== 'string') throw new SluiceArgumentError(`${what} is missing (got ${kindOf(id)}).`);
  if (id === '') throw new SluiceArgumentError(`${what} is empty.`);
  if (id === '.' || id === '..') throw new SluiceArgumentError(`${what} "${id}" names no record.`);
  return encodeURIComponent(id);
}

/** The longest Idempotency-Key the API takes. */
const MAX_IDEMPOTENCY_KEY = 255;

/** `key` as the Idempotency-Key header; throws SluiceArgumentError (naming the character, never the key) for one the API refuses. */
export function idempotencyKeyHeader(key: string): string {
  const problem = headerValueProblem('The idempotency key', key, 'Idempotency-Key');
  if (problem !== undefined) throw new SluiceArgumentError(problem);
  if (key.length > MAX_IDEMPOTENCY_KEY) throw new SluiceArgumentError(`The idempotency key is ${key.length} characters long; the API takes at most ${MAX_IDEMPOTENCY_KEY}.`);
  return key;
}

/** The characters RFC 9110 allows in a header name. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What fetch sends in a header value: no NUL or line break, nothing past U+00FF. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * A call's extra headers, as fetch sends them (white space and line breaks at a value's ends
 * dropped), checked before anything is sent: fetch would refuse the rest only when the request is
 * made, which read as a network failure (retried) and quoted the value. Throws SluiceArgumentError
 * naming the header and the character, never the value.
 */
export function checkedHeaders(headers: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const checked: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!HEADER_NAME.test(name)) throw new SluiceArgumentError(`${JSON.stringify(name.slice(0, 64))} is not a header name (letters, digits and !#$%&'*+-.^_\`|~ only).`);
    if (typeof value !== 'string') throw new SluiceArgumentError(`The ${name} header's value is not text (got ${kindOf(value)}).`);
    const sent = withoutEndSpace(value);
    const problem = problemWith(`The ${name} header's value`, sent, HEADER_VALUE, 'a header value holds no line break, NUL or character past U+00FF.');
    if (problem !== undefined) throw new SluiceArgumentError(problem);
    checked[name] = sent;
  }
  return checked;
}
