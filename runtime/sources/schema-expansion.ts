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

/** What a local `$ref` ("#", "#/definitions/a") points to in `root`, or undefined (ajv refuses those itself). */
function resolve(root: Schema, ref: string): Schema | undefined {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    let part: string;
    try {
      part = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    node = isSchema(node) || Array.isArray(node) ? (node as Record<string, unknown>)[part] : undefined;
  }
  return isSchema(node) ? node : undefined;
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
