// A source's or device's event type schemas are stored parsed: a number JSON.parse does not keep as
// written (1e400 becomes Infinity and then null, 1e-400 becomes 0, a whole number past ±(2^53 − 1) a
// neighbour) would change meaning on the way in (`"enum":[1e400]` was stored and checked as
// `"enum":[null]`). Such a write is refused, naming the number (inexact-number.ts).

import { InputError } from '../errors.ts';
import { parseJsonRequestText } from '../http/parse-json.ts';
import type { HttpRequest } from '../http/types.ts';
import { changedNumberIn } from '../validation/inexact-number.ts';
import { memberText } from '../validation/json-member-text.ts';
import { cutText } from '../validation/shown-name.ts';

/** The request's JSON body (parseJsonRequest), refused 400 `invalid_event_schema` when its `event_types` hold a number that cannot be stored exactly. */
export function parseSchemaWrite(request: HttpRequest): unknown {
  const { value, text } = parseJsonRequestText(request);
  const schemas = memberText(text, 'event_types');
  const changed = schemas === undefined ? undefined : changedNumberIn(schemas);
  if (changed !== undefined) {
    throw new InputError(400, 'invalid_event_schema', `event_types holds the number ${cutText(changed, 40)}, which would not be stored as written (it reads as ${String(Number(changed))}: write a number a double holds).`, { field: 'event_types' });
  }
  return value;
}
