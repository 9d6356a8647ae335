// Turns a JSON Schema into a parser of untrusted API bodies (ajv), with errors naming the field.
// Every request body of the REST API goes through one of these before any handler logic.

import { Ajv, type ErrorObject, type JSONSchemaType, type ValidateFunction } from 'ajv';
import { InputError } from '../errors.ts';

const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });

/** A parser that returns a typed value or throws a 400 InputError whose `field` names the bad path. */
export type BodyParser<T> = (value: unknown) => T;

export function createBodyParser<T>(schema: JSONSchemaType<T> | Record<string, unknown>, code = 'invalid_request'): BodyParser<T> {
  const validate = ajv.compile(schema) as ValidateFunction<T>;
  return (value: unknown): T => {
    if (validate(value)) return value;
    const first = validate.errors?.[0];
    throw describeSchemaError(first, code);
  };
}

/** `/steps/1/type` -> `steps[1].type`; the property an error is about is appended when ajv names it apart. */
export function fieldPath(error: ErrorObject): string {
  const parts = error.instancePath.split('/').slice(1).map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  const extra = error.params as { missingProperty?: string; additionalProperty?: string };
  if (extra.missingProperty !== undefined) parts.push(extra.missingProperty);
  if (extra.additionalProperty !== undefined) parts.push(extra.additionalProperty);
  return parts.reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path === '' ? part : `${path}.${part}`), '');
}

export function describeSchemaError(error: ErrorObject | undefined, code: string, status = 400): InputError {
  if (error === undefined) return new InputError(status, code, 'The request body is invalid.');
  const field = fieldPath(error);
  const where = field === '' ? 'The request body' : `Field "${field}"`;
  const message =
    error.keyword === 'additionalProperties'
      ? `${where} is not a known field.`
      : error.keyword === 'required'
        ? `${where} is required.`
        : `${where} ${error.message ?? 'is invalid'}.`;
  return new InputError(status, error.keyword === 'additionalProperties' ? 'unknown_field' : code, message, field === '' ? {} : { field });
}
