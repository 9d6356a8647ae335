// Compiles the JSON Schemas that sources declare for their event types (ajv + ajv-formats).
// Compiled validators are cached per source version; schema errors name the failing payload field.

import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { InputError } from '../errors.ts';
import { describeSchemaError } from '../validation/body-schema.ts';
import type { SourceRecord } from './source-record.ts';

const MAX_SCHEMA_BYTES = 64 * 1024;

// A separate instance: customer schemas never share compiled state with the API's own schemas.
// Not strict: real-world schemas carry harmless extras (`required` without `properties`, vendor
// keywords); meta-schema validation still refuses anything that is not a JSON Schema.
const ajv = new Ajv({ allErrors: false, strict: false, allowUnionTypes: true });
(addFormats as unknown as (instance: Ajv) => void)(ajv);

const cache = new Map<string, ValidateFunction>();

/** Compiles every declared schema; a schema that is not valid JSON Schema is a 400 naming the event type. */
export function assertSchemasCompile(eventTypes: Readonly<Record<string, object>>): void {
  for (const [type, schema] of Object.entries(eventTypes)) {
    const field = `event_types.${type}`;
    if (JSON.stringify(schema).length > MAX_SCHEMA_BYTES) {
      throw new InputError(400, 'schema_too_large', `The schema for "${type}" exceeds ${MAX_SCHEMA_BYTES} bytes.`, { field });
    }
    try {
      ajv.compile(schema);
    } catch (error) {
      const detail = error instanceof Error ? error.message : 'invalid schema';
      throw new InputError(400, 'invalid_event_schema', `The schema for "${type}" is not a valid JSON Schema: ${detail}.`, { field });
    }
  }
}

/** Validates a payload against the source's schema for `type`, if one is declared; throws 422 naming the field. */
export function validateEventPayload(source: SourceRecord, type: string, payload: unknown): void {
  const schema = source.event_types[type];
  if (schema === undefined) return;
  const cacheKey = `${source.org_id}\u0000${source.name}\u0000${source.updated_at}\u0000${type}`;
  let validate = cache.get(cacheKey);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    if (cache.size > 10_000) cache.clear();
    cache.set(cacheKey, validate);
  }
  if (!validate(payload)) {
    const error = describeSchemaError(validate.errors?.[0], 'schema_validation_failed', 422);
    const field = error.field === undefined ? 'payload' : `payload.${error.field}`;
    throw new InputError(422, 'schema_validation_failed', error.message.replace(/^Field "[^"]*"|^The request body/, `Field "${field}"`), { field });
  }
}
