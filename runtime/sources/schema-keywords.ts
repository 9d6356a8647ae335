// Which keys a declared event schema may hold: keywords ajv checks (draft-07), annotations, and
// vendor extensions. Anything else checks nothing, silently: a typo ("propertees", "requird") or a
// keyword of a later draft ("unevaluatedProperties", "dependentRequired") would let every payload
// through that its author meant to refuse. Checked when a schema is written, not when a stored one
// is used, so sources and devices written before this rule keep ingesting.

import { shownName } from '../validation/shown-name.ts';
import traverse from 'json-schema-traverse';

/**
 * Keys that describe rather than check, kept as written: JSON Schema's own annotations, OpenAPI's,
 * and those of common editors and generators (VS Code and the JSON Schema Store, ajv-errors and
 * zod-to-json-schema, typescript-json-schema).
 */
const ANNOTATIONS = new Set([
  '$schema', '$id', 'definitions', '$defs', 'title', 'description', 'default', 'examples', 'example',
  'deprecated', 'readOnly', 'writeOnly', 'contentMediaType', 'contentEncoding', 'contentSchema', '$anchor', '$async',
  'discriminator', 'xml', 'externalDocs',
  'markdownDescription', 'deprecationMessage', 'markdownDeprecationMessage', 'enumDescriptions', 'markdownEnumDescriptions',
  'defaultSnippets', 'doNotSuggest', 'suggestSortText', 'patternErrorMessage', 'allowComments', 'allowTrailingCommas', 'secret',
  'showInPicker', 'errorMessage', 'defaultProperties', 'propertyOrder', 'tsType',
]);

/** Keywords of the 2019-09 and 2020-12 drafts that draft-07 validation does not apply. */
const LATER_DRAFT = new Set([
  'unevaluatedProperties', 'unevaluatedItems', 'dependentRequired', 'dependentSchemas', 'prefixItems',
  'minContains', 'maxContains', '$dynamicRef', '$dynamicAnchor', '$recursiveRef', '$recursiveAnchor', '$vocabulary',
]);

/** The `$schema` values that name draft-07, the one dialect the schemas are read in. */
const DRAFT_07 = /^http:\/\/json-schema\.org\/draft-07\/schema#?$/;

/** A top-level `$schema` naming another dialect (ajv would say only "no schema with key or ref"), said as a problem; or undefined. */
export function otherDialect(schema: object): string | undefined {
  const named = (schema as { $schema?: unknown }).$schema;
  if (named === undefined || (typeof named === 'string' && DRAFT_07.test(named))) return undefined;
  return `"$schema" names ${JSON.stringify(named).slice(0, 100)}, but schemas are read as JSON Schema draft-07 ("http://json-schema.org/draft-07/schema#", or leave "$schema" out)`;
}

/** The first key of `schema` (at any subschema) that checks nothing, said as a problem; or undefined. */
export function unknownKeyword(schema: object, applies: (keyword: string) => boolean): string | undefined {
  let problem: string | undefined;
  traverse(schema, { allKeys: false }, (subschema, pointer) => {
    if (problem !== undefined) return;
    for (const key of Object.keys(subschema)) {
      if (applies(key) || ANNOTATIONS.has(key) || key.startsWith('x-')) continue;
      const where = `"${shownName(key)}" at "${pointer || '/'}"`;
      problem = LATER_DRAFT.has(key)
        ? `${where} is a keyword of a later JSON Schema draft; draft-07 validation would ignore it and check nothing`
        : `${where} is not a JSON Schema (draft-07) keyword, so it would check nothing (annotations such as "title", and keys starting "x-", are kept)`;
      return;
    }
  });
  return problem;
}
