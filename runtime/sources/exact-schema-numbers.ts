// A source's or device's event type schemas are stored parsed: a number JSON.parse cannot keep (a
// whole number past ±(2^53 − 1), or 1e400, which becomes Infinity and then null) would change
// meaning on the way in (`"enum":[1e400]` was stored and checked as `"enum":[null]`). Such a write
// is refused, naming the number, as an action's output is (inexact-number.ts).

import { InputError } from '../errors.ts';
import { parseJsonRequestText } from '../http/parse-json.ts';
import type { HttpRequest } from '../http/types.ts';
import { inexactNumberIn } from '../validation/inexact-number.ts';
import { memberText } from '../validation/json-member-text.ts';
import { cutText } from '../validation/shown-name.ts';

/** The request's JSON body (parseJsonRequest), refused 400 `invalid_event_schema` when its `event_types` hold a number that cannot be stored exactly. */
export function parseSchemaWrite(request: HttpRequest): unknown {
  const { value, text } = parseJsonRequestText(request);
  const schemas = memberText(text, 'event_types');
  const inexact = schemas === undefined ? undefined : inexactNumberIn(schemas);
  if (inexact !== undefined) {
    throw new InputError(400, 'invalid_event_schema', `event_types holds the number ${cutText(inexact, 40)}, which would not be stored as written (a whole number beyond ±(2^53 − 1), or one too large for a double).`, { field: 'event_types' });
  }
  return value;
}
