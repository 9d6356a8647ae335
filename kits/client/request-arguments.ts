// Arguments a REST call puts into its request line or headers, checked before anything is sent.
// encodeURIComponent leaves "." and ".." as they are, and URL resolution reads them as "this folder"
// and "the one above"; an empty id drops its segment: `/runs/` or `/runs/.` reached the run list,
// whose answer then read as a run. A header value outside visible ASCII is refused by fetch (after
// the retries of a keyed call, as a network error) or, for bytes above 0x7f at its ends, trimmed
// off by the server's HTTP parser, so two different idempotency keys would name one replay.

import { SluiceArgumentError } from './api-errors.ts';
import { headerValueProblem } from './credential-check.ts';

/** `id` as one segment of a request path; throws SluiceArgumentError for one that names no record. */
export function pathId(what: string, id: string): string {
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
