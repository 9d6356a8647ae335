// How big a customer schema is once its `$ref`s are followed: what ajv may walk for one payload
// value. A 2 KB schema whose definitions each `allOf` the previous one twice grows to 2^28
// subschemas, and one 46-byte webhook against it held the event loop (every tenant) for seconds,
// hours a few levels deeper. So the expansion is capped, and a `$ref` that leads back into itself
// (recursion) is refused: with two paths back it doubles per level of the payload.

import traverse from 'json-schema-traverse';

/** The most subschemas a schema may hold with every `$ref` replaced by what it points to. */
export const MAX_EXPANDED_SUBSCHEMAS = 20_000;

/** json-schema-traverse's keyword tables (in its JavaScript, not in its type declarations). */
const KEYWORDS = traverse as unknown as Record<'keywords' | 'arrayKeywords' | 'propsKeywords', Readonly<Record<string, true>>>;

/** Keywords whose subschemas reach a payload only through a `$ref` to them. */
const DEFINITIONS = new Set(['$defs', 'definitions']);

type Schema = Readonly<Record<string, unknown>>;

const isSchema = (value: unknown): value is Schema => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The subschemas a schema applies (not its definitions), each with its JSON pointer. */
function* appliedSubschemas(schema: Schema, pointer: string): Generator<[Schema, string]> {
  for (const [keyword, value] of Object.entries(schema)) {
    const at = `${pointer}/${escapePointer(keyword)}`;
    if (keyword in KEYWORDS.keywords && isSchema(value)) yield [value, at];
    if (keyword in KEYWORDS.arrayKeywords && Array.isArray(value)) {
      for (const [i, item] of value.entries()) if (isSchema(item)) yield [item, `${at}/${i}`];
    }
    if (keyword in KEYWORDS.propsKeywords && !DEFINITIONS.has(keyword) && isSchema(value)) {
      for (const [name, sub] of Object.entries(value)) if (isSchema(sub)) yield [sub, `${at}/${escapePointer(name)}`];
    }
  }
}

const escapePointer = (key: string): string => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** A pointer segment as written in a `$ref` (percent-encoded, `~1` and `~0` escaped), or undefined when malformed. */
function decodeSegment(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
  } catch {
    return undefined;
  }
}

/**
 * Why a local `$ref` may not be followed, or undefined: it must be "#" or a JSON pointer through
 * schema positions only (keywords whose values are schemas, the names under `properties` or
 * `definitions`, the items of `allOf`). ajv applies whatever a `$ref` points at, but the checks a
 * schema gets when it is written (patterns, formats, keywords, `uniqueItems`) walk schema positions
 * only: a pattern kept under `x-rules` or `default` and referred to went past all of them. A `#`
 * inside the pointer ends it for ajv (`#/definitions/a#` is `#/definitions/a`) but not for the
 * recursion check, which it got past.
 */
export function refProblem(ref: string): string | undefined {
  if (ref === '#') return undefined;
  if (!ref.startsWith('#/') || ref.includes('#', 1)) return 'must be "#" or a JSON pointer ("#/definitions/name"), with no other "#"';
  let expecting: 'keyword' | 'name' | 'index' | 'index or keyword' = 'keyword';
  for (const raw of ref.slice(2).split('/')) {
    const segment = decodeSegment(raw);
    if (segment === undefined) return 'holds a malformed percent-escape';
    if (expecting === 'name' || (expecting.startsWith('index') && /^\d+$/.test(segment))) {
      expecting = 'keyword';
      continue;
    }
    if (expecting === 'index') return `points into "${segment}", which is not an index of a schema list`;
    if (segment in KEYWORDS.propsKeywords) expecting = 'name';
    else if (segment in KEYWORDS.arrayKeywords) expecting = segment in KEYWORDS.keywords ? 'index or keyword' : 'index';
    else if (segment in KEYWORDS.keywords) expecting = 'keyword';
    else return `points into "${segment}", which holds no schema (refer to a schema under "definitions" or "$defs")`;
  }
  return expecting === 'keyword' || expecting === 'index or keyword' ? undefined : 'ends where a name or index should follow';
}

/**
 * What a local `$ref` ("#", "#/definitions/a") points to in `root`, through the schema's own members
 * only, or undefined when nothing is there. (ajv's own walk also reads the names every JavaScript
 * object inherits: "#/definitions/valueOf" found a function there and checked nothing.)
 */
export function refTarget(root: object, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const part = decodeSegment(raw);
    if (part === undefined || typeof node !== 'object' || node === null || !Object.hasOwn(node, part)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/** The schema a local `$ref` points to, or undefined (refused when the schema was written: event-schemas.ts). */
function resolve(root: Schema, ref: string): Schema | undefined {
  const target = refTarget(root, ref);
  return isSchema(target) ? target : undefined;
}

/**
 * Why the schema is too big once expanded, or recursive, or undefined. The count stops once past
 * the cap, and each `$ref` target is counted once (memoized), so the check itself is linear.
 */
export function expansionProblem(root: object): string | undefined {
  const sizes = new Map<Schema, number>();
  const open = new Set<Schema>();
  let problem: string | undefined;
  const size = (schema: Schema, pointer: string): number => {
    const known = sizes.get(schema);
    if (known !== undefined) return known;
    if (open.has(schema)) {
      problem = `the "$ref" at "${pointer || '/'}" leads back into itself; recursive schemas are not supported`;
      return Number.POSITIVE_INFINITY;
    }
    open.add(schema);
    let total = 1;
    if (typeof schema['$ref'] === 'string') {
      const target = resolve(root as Schema, schema['$ref']);
      if (target !== undefined) total += size(target, `${pointer}/$ref`);
    }
    for (const [sub, at] of appliedSubschemas(schema, pointer)) {
      if (total > MAX_EXPANDED_SUBSCHEMAS) break;
      total += size(sub, at);
    }
    open.delete(schema);
    sizes.set(schema, total);
    return total;
  };
  const total = size(root as Schema, '');
  if (problem !== undefined) return problem;
  if (total > MAX_EXPANDED_SUBSCHEMAS) {
    return `it holds more than ${MAX_EXPANDED_SUBSCHEMAS.toLocaleString('en-US')} subschemas once its "$ref"s are followed; reuse fewer definitions in each other`;
  }
  return undefined;
}
