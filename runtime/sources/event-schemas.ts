// Compiles the JSON Schemas that sources (and devices) declare for their event types (ajv +
// ajv-formats). Compiled validators are cached per (org, source, event type), within bounds (validator-cache.ts);
// schema errors name the failing payload field.
// Customer schemas are hostile input: `pattern` runs on RE2 (linear time, no backtracking, a
// capped program size), `uniqueItems` must be linear or bounded (unboundedUniqueItems), `$ref`s
// may not recurse or expand past a cap (schema-expansion.ts), and no
// compiled schema stays registered in ajv, so one tenant's `$id` can neither clash with nor be
// `$ref`erenced by another tenant's schema; the compiling instance is replaced once it has compiled
// as much as the validator cache holds (schema-compiler.ts), so compiling never grows memory.

import { shownName } from '../validation/shown-name.ts';
import type { ValidateFunction } from 'ajv';
import traverse from 'json-schema-traverse';
import { InputError } from '../errors.ts';
import { describeSchemaError } from '../validation/body-schema.ts';
import { PROTO_KEY, protoKeyPath } from '../validation/proto-key.ts';
import { MAX_PATTERN_PROGRAM_SIZE, MAX_SCHEMA_PATTERN_PROGRAM, patternProgramSize, SchemaCompiler } from './schema-compiler.ts';
import { expansionProblem, refProblem, refTarget } from './schema-expansion.ts';
import { otherDialect, unknownKeyword } from './schema-keywords.ts';
import { ValidatorCache } from './validator-cache.ts';
import { EVENT_TYPE_PATTERN, type SourceRecord } from './source-record.ts';

/**
 * Who declares schemas for the event types it sends: a source, or a device (whose `name` here is its
 * event source, `@device:<name>`, which no source name can be). `updated_at` versions the validators
 * (the checking thread, schema-check-worker.ts, passes the schema's text: any change is a new version).
 */
export type SchemaDeclarer = Pick<SourceRecord, 'org_id' | 'name' | 'event_types' | 'updated_at'>;

const MAX_SCHEMA_BYTES = 64 * 1024;

/** The `event_types` member of an API body (a source's or a device's): up to 200 types, each mapped to a schema object. */
export const EVENT_TYPES_BODY_SCHEMA = {
  type: 'object',
  maxProperties: 200,
  propertyNames: { pattern: EVENT_TYPE_PATTERN },
  additionalProperties: { type: 'object' },
} as const;

/** Up to 2,000 validators from up to 16 MiB of schemas: about 0.5 GB of heap at most. */
const CACHE_BOUNDS = { compiles: 2_000, bytes: 16 * 1024 * 1024 };
const cache = new ValidatorCache(CACHE_BOUNDS.compiles, CACHE_BOUNDS.bytes);
/** Compiles the validators ingest caches; they hold the instance that compiled them, so a replaced one goes with all of them. */
const compiler = new SchemaCompiler(CACHE_BOUNDS, () => cache.clear());
/** A write's check compiles in an instance of its own, dropped after it: it neither spends the ingest compiler's budget nor empties the cache every tenant reads. */
const scratchCompiler = (): SchemaCompiler => new SchemaCompiler({ compiles: Number.POSITIVE_INFINITY, bytes: Number.POSITIVE_INFINITY }, () => undefined);

const ANCHOR_KEYWORDS = ['$anchor', '$dynamicAnchor', '$recursiveAnchor', '$dynamicRef', '$recursiveRef'] as const;
const anchorOf = (subschema: object): string | undefined => ANCHOR_KEYWORDS.find((keyword) => Object.hasOwn(subschema, keyword));

/** Why a schema is not self-contained (a `$id`, a `$ref` outside itself) or not synchronous (`$async`), or undefined. */
function notSelfContained(schema: object): string | undefined {
  let problem: string | undefined;
  // allKeys, as ajv itself walks a schema for ids: a `$id` under any keyword would be registered.
  traverse(schema, { allKeys: true }, (subschema, pointer) => {
    if (problem !== undefined) return;
    const anchor = anchorOf(subschema);
    const ref: unknown = subschema.$ref;
    if (Object.hasOwn(subschema, '$id')) problem = `"$id" at "${pointer || '/'}" is not allowed`;
    // A `$ref: "#name"` to an anchor would pass by the expansion cap and the recursion check
    // (schema-expansion.ts follows JSON pointers only); "#/…" pointers say the same.
    else if (anchor !== undefined) problem = `"${anchor}" at "${pointer || '/'}" is not allowed (refer to "#/…" instead)`;
    // An async validator answers a promise, which reads as "valid", and rejects one for a bad payload.
    else if (Object.hasOwn(subschema, '$async')) problem = `"$async" at "${pointer || '/'}" is not allowed`;
    else if (typeof ref === 'string' && !ref.startsWith('#')) problem = `"$ref" at "${pointer || '/'}" must point inside the schema (start with "#")`;
    else if (typeof ref === 'string') {
      const target = refTarget(schema, ref);
      const points = (typeof target === 'object' && target !== null) || typeof target === 'boolean';
      const why = refProblem(ref) ?? (points ? undefined : 'points to no schema in this one');
      if (why !== undefined) problem = `"$ref": "${shownName(ref)}" at "${pointer || '/'}" ${why}`;
    }
  });
  return problem;
}

/**
 * A `format` ajv does not know, or undefined. Not strict, ajv only logs one and checks nothing: a
 * typo such as "emial" would validate no payload. Checked when a schema is written, not when a
 * stored one is used, so sources written before this rule keep ingesting.
 */
function unknownFormat(schema: object): string | undefined {
  let problem: string | undefined;
  // Only where ajv applies `format` (not inside `example`, `x-*` or other annotations).
  traverse(schema, { allKeys: false }, (subschema, pointer) => {
    if (problem === undefined && typeof subschema.format === 'string' && !compiler.formats.includes(subschema.format)) {
      problem = `"format": "${shownName(subschema.format)}" at "${pointer || '/'}" is not a known format (${compiler.formats.join(', ')})`;
    }
  });
  return problem;
}

/** The most items a `uniqueItems` array may be declared to hold when ajv must compare them pairwise. */
export const MAX_PAIRWISE_UNIQUE_ITEMS = 100;

const SCALAR_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null']);

/**
 * Why a `uniqueItems` could cost seconds, or undefined. ajv checks uniqueness in linear time only
 * when `items` declares scalar types; otherwise it compares every pair, and one 1 MiB payload of
 * 140,000 numbers held the event loop (every tenant's requests) for 27 s. So such an array needs
 * a `maxItems` that bounds the pairs: 100 (1,000 large objects, pairs times their size, took 1.5 s
 * in 0.8 MB).
 */
function unboundedUniqueItems(schema: object): string | undefined {
  let problem: string | undefined;
  traverse(schema, { allKeys: false }, (subschema, pointer) => {
    if (problem !== undefined || subschema.uniqueItems !== true) return;
    const itemTypes = [subschema.items?.type].flat();
    const linear = itemTypes.length > 0 && itemTypes.every((type) => SCALAR_TYPES.has(type));
    const bounded = typeof subschema.maxItems === 'number' && subschema.maxItems <= MAX_PAIRWISE_UNIQUE_ITEMS;
    if (!linear && !bounded) {
      problem = `"uniqueItems" at "${pointer || '/'}" needs "maxItems" of at most ${MAX_PAIRWISE_UNIQUE_ITEMS}, or "items" with only scalar types (string, number, integer, boolean, null)`;
    }
  });
  return problem;
}

/**
 * Why a stored schema would be refused at ingest without compiling it (a rule introduced after it
 * was written), or undefined: the checks compileIsolated makes before ajv sees the schema.
 */
export function storedSchemaProblem(schema: object): string | undefined {
  // Cheap structural checks only: this runs on the event loop at every start, for every stored
  // schema. (The patterns' RE2 programs are weighed where schemas compile, in the checking thread.)
  return notSelfContained(schema) ?? unboundedUniqueItems(schema) ?? expansionProblem(schema);
}

/**
 * The RE2 instructions the schema's distinct patterns (`pattern` values, `patternProperties` keys;
 * ajv compiles each distinct one once) compile to, with why that is too much, if it is: each at
 * most MAX_PATTERN_PROGRAM_SIZE, all together at most MAX_SCHEMA_PATTERN_PROGRAM. A compiled
 * instruction costs about 70 bytes of heap: 468 patterns of 9,000 instructions in one 64 KB schema
 * took 300 MB of the checking thread. Weighing stops at the first pattern past the budget, so a
 * hostile schema costs little to refuse.
 */
function patternProgram(schema: object): { readonly instructions: number; readonly problem: string | undefined } {
  let problem: string | undefined;
  let instructions = 0;
  const seen = new Set<string>();
  traverse(schema, { allKeys: false }, (subschema, pointer) => {
    if (problem !== undefined) return;
    const patterns = [...(typeof subschema.pattern === 'string' ? [subschema.pattern] : []), ...Object.keys(typeof subschema.patternProperties === 'object' && subschema.patternProperties !== null ? subschema.patternProperties : {})];
    for (const pattern of patterns) {
      if (problem !== undefined || seen.has(pattern)) continue;
      seen.add(pattern);
      const size = patternProgramSize(pattern);
      instructions += size;
      if (size > MAX_PATTERN_PROGRAM_SIZE) problem = `the pattern "${shownName(pattern)}" compiles to ${size} RE2 instructions, more than ${MAX_PATTERN_PROGRAM_SIZE.toLocaleString('en-US')} (lower its counted repetitions such as {1000})`;
      else if (instructions > MAX_SCHEMA_PATTERN_PROGRAM) problem = `its patterns compile to more than ${MAX_SCHEMA_PATTERN_PROGRAM.toLocaleString('en-US')} RE2 instructions in all (past it at "${pointer || '/'}"); use fewer or simpler patterns`;
    }
  });
  return { instructions, problem };
}

/** Cache weight of one RE2 instruction, in the schema-text bytes the validator cache counts (a validator takes ~30x its text; an instruction ~70 bytes). */
const INSTRUCTION_WEIGHT = 3;

/**
 * Compiles one customer schema and drops ajv's own reference to it; the validator keeps working.
 * Only self-contained schemas: without any `$id`, ajv registers nothing, and removing the schema
 * removes only its cache entry (by object), never a registered schema such as the meta-schema.
 */
function compileIsolated(schema: object, using: SchemaCompiler = compiler): { readonly validate: ValidateFunction; readonly weight: number } {
  const problem = notSelfContained(schema);
  if (problem !== undefined) throw new Error(`${problem}: event type schemas must be self-contained`);
  // Also for a schema stored before this rule: a payload must never cost seconds to validate.
  const unbounded = unboundedUniqueItems(schema) ?? expansionProblem(schema);
  if (unbounded !== undefined) throw new Error(unbounded);
  const program = patternProgram(schema);
  if (program.problem !== undefined) throw new Error(program.problem);
  // Weighed with its patterns' programs: the validator cache bounds the checking thread's heap.
  const weight = JSON.stringify(schema).length + INSTRUCTION_WEIGHT * program.instructions;
  return { validate: using.compile(schema, weight), weight };
}

/** Compiles every declared schema; a schema that is not valid JSON Schema is a 400 naming the event type. */
export function assertSchemasCompile(eventTypes: Readonly<Record<string, object>>): void {
  // Made for the first schema only: a write that declares none costs no ajv instance.
  let scratch: SchemaCompiler | undefined;
  for (const [type, schema] of Object.entries(eventTypes)) {
    const field = `event_types.${type}`;
    if (Buffer.byteLength(JSON.stringify(schema)) > MAX_SCHEMA_BYTES) {
      throw new InputError(400, 'schema_too_large', `The schema for "${type}" exceeds ${MAX_SCHEMA_BYTES} bytes.`, { field });
    }
    try {
      const protoAt = protoKeyPath(schema);
      if (protoAt !== undefined) throw new Error(`the key "${PROTO_KEY}" (at ${protoAt}) cannot be stored`);
      const problem = otherDialect(schema) ?? unknownFormat(schema) ?? unknownKeyword(schema, (keyword) => compiler.appliesKeyword(keyword));
      if (problem !== undefined) throw new Error(problem);
      compileIsolated(schema, (scratch ??= scratchCompiler()));
    } catch (error) {
      const detail = error instanceof Error ? error.message : 'invalid schema';
      throw new InputError(400, 'invalid_event_schema', `The schema for "${type}" is not a valid JSON Schema: ${detail}.`, { field });
    }
  }
}

const cacheKeyOf = (orgId: string, sourceName: string, type: string): string => `${orgId}\u0000${sourceName}\u0000${type}`;

/**
 * The compiled validator of the source's schema for `type` (cached per source version), or
 * undefined when the type declares none; throws 422 `invalid_event_schema` for a stored schema that
 * no longer compiles. Runs in the checking thread (schema-check-worker.ts): compiling can take long.
 */
export function compiledValidator(source: SchemaDeclarer, type: string): ValidateFunction | undefined {
  // Own keys only: a type named like an Object.prototype member ("constructor") declares no schema.
  if (!Object.hasOwn(source.event_types, type)) return undefined;
  const schema = source.event_types[type]!;
  const cacheKey = cacheKeyOf(source.org_id, source.name, type);
  let validate = cache.get(cacheKey, source.updated_at);
  if (validate === undefined) {
    let weight: number;
    try {
      ({ validate, weight } = compileIsolated(schema));
    } catch (error) {
      // Only a schema stored before a rule it breaks was introduced (writes compile it first).
      const detail = error instanceof Error ? error.message : 'invalid schema';
      throw new InputError(422, 'invalid_event_schema', `The source's schema for "${type}" no longer compiles (${detail}); update the source.`, { field: `event_types.${type}` });
    }
    cache.set(cacheKey, source.updated_at, validate, weight);
  }
  return validate;
}

/** Checks a payload with a compiled validator; throws 422 `schema_validation_failed` naming the field. */
export function validateWith(validate: ValidateFunction, payload: unknown): void {
  // `!== true`: only a synchronous validator's true is a pass (`$async` is refused, this is the backstop).
  if (validate(payload) !== true) {
    const error = describeSchemaError(validate.errors?.[0], 'schema_validation_failed', 422);
    const field = error.field === undefined ? 'payload' : `payload.${error.field}`;
    throw new InputError(422, 'schema_validation_failed', error.message.replace(/^Field "[^"]*"|^The request body/, `Field "${field}"`), { field });
  }
}
