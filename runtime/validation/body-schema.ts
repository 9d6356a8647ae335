// Turns a JSON Schema into a parser of untrusted API bodies (ajv), with errors naming the field.
// Every request body of the REST API goes through one of these before any handler logic.

import { Ajv, type ErrorObject, type JSONSchemaType, type ValidateFunction } from 'ajv';
import { InputError } from '../errors.ts';
import { shownName } from './shown-name.ts';

// `verbose` puts the failing object and its schema on an error, so a missing field can be told
// apart from a misspelled one. allErrors stays off: on untrusted input it lets one body produce an
// error per element.
const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true, verbose: true });

/** A parser that returns a typed value or throws a 400 InputError whose `field` names the bad path. */
export type BodyParser<T> = (value: unknown) => T;

/** `subject` names the whole value in messages ("The request body must be an object."). */
export function createBodyParser<T>(schema: JSONSchemaType<T> | Record<string, unknown>, code = 'invalid_request', subject = 'The request body'): BodyParser<T> {
  const validate = ajv.compile(schema) as ValidateFunction<T>;
  return (value: unknown): T => {
    if (validate(value)) return value;
    const first = validate.errors?.[0];
    throw describeSchemaError(first, code, 400, subject);
  };
}

/**
 * `/steps/1/type` -> `steps[1].type`; the property an error is about is appended when ajv names it
 * apart, and a key refused by `propertyNames` in brackets (`event_types["bad type!"]`). Names the
 * caller made up are cut to 64 characters, so an error stays small whatever the body.
 */
export function fieldPath(error: ErrorObject): string {
  const parts = error.instancePath.split('/').slice(1).map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  const extra = error.params as { missingProperty?: string; additionalProperty?: string };
  if (extra.missingProperty !== undefined) parts.push(extra.missingProperty);
  if (extra.additionalProperty !== undefined) parts.push(extra.additionalProperty);
  const path = parts.map(shownName).reduce((joined, part) => (/^\d+$/.test(part) ? `${joined}[${part}]` : joined === '' ? part : `${joined}.${part}`), '');
  return error.propertyName === undefined ? path : `${path}[${JSON.stringify(shownName(error.propertyName))}]`;
}

/** A key of the object that failed `required` which its schema does not know: most likely the misspelled field. */
function unknownKeyBeside(error: ErrorObject): string | undefined {
  const schema = error.parentSchema as { properties?: Record<string, unknown>; additionalProperties?: unknown } | undefined;
  if (schema?.additionalProperties !== false || typeof error.data !== 'object' || error.data === null) return undefined;
  const known = schema.properties ?? {};
  return Object.keys(error.data).find((key) => !Object.hasOwn(known, key));
}

const quoteAll = (values: readonly unknown[]): string => values.map((value) => JSON.stringify(value)).join(', ');

/** ajv's own wording for the rest, made to read as a sentence about the field. */
function problemOf(error: ErrorObject): string {
  const params = error.params as { allowedValues?: unknown[]; type?: string | string[]; limit?: number; i?: number; j?: number };
  switch (error.keyword) {
    case 'enum':
      return `must be one of ${quoteAll(params.allowedValues ?? [])}`;
    case 'type': {
      const types = Array.isArray(params.type) ? params.type : [params.type ?? 'valid'];
      return `must be ${types.map((type) => (/^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`)).join(' or ')}`;
    }
    case 'minProperties':
      return params.limit === 1 ? 'must name at least one field' : `must name at least ${params.limit} fields`;
    // A pattern no one reads as a rule (control characters, "not only spaces") says it in words: the schema's description.
    case 'pattern': {
      const { description } = (error.parentSchema ?? {}) as { description?: unknown };
      return typeof description === 'string' ? `must be ${description}` : (error.message ?? 'is invalid');
    }
    // ajv's own: "must NOT have duplicate items (items ## 1 and 0 are identical)".
    case 'uniqueItems':
      return `must not list the same value twice (entries ${Math.min(params.i ?? 0, params.j ?? 0)} and ${Math.max(params.i ?? 0, params.j ?? 0)}, counted from 0)`;
    default:
      return error.message ?? 'is invalid';
  }
}

export function describeSchemaError(error: ErrorObject | undefined, code: string, status = 400, subject = 'The request body'): InputError {
  if (error === undefined) return new InputError(status, code, `${subject} is invalid.`);
  const field = fieldPath(error);
  const where = field === '' ? subject : `Field "${field}"`;
  if (error.keyword === 'required') {
    const unknown = unknownKeyBeside(error);
    if (unknown !== undefined) {
      const path = field.replace(/\.?[^.[\]]+$/, '');
      const unknownField = path === '' ? shownName(unknown) : `${path}.${shownName(unknown)}`;
      return new InputError(status, 'unknown_field', `Field "${unknownField}" is not a known field (and "${field}" is required: is it misspelled?).`, { field: unknownField });
    }
  }
  const message =
    error.keyword === 'additionalProperties'
      ? `${where} is not a known field.`
      : error.keyword === 'required'
        ? `${where} is required.`
        : `${where} ${problemOf(error)}.`;
  return new InputError(status, error.keyword === 'additionalProperties' ? 'unknown_field' : code, message, field === '' ? {} : { field });
}
