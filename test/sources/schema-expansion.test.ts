// The expanded size of a schema: each `$ref` counts what it points to, definitions count only
// where referenced, a shared definition is counted per use but walked once, and recursion is named.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { expansionProblem, MAX_EXPANDED_SUBSCHEMAS, refProblem } from '../../runtime/sources/schema-expansion.ts';

/** A schema whose `uses` properties each refer to one definition of `width` properties. */
const sharedDefinition = (uses: number, width: number): object => ({
  definitions: { wide: { properties: Object.fromEntries(Array.from({ length: width }, (_, i) => [`p${i}`, { type: 'string' }])) } },
  properties: Object.fromEntries(Array.from({ length: uses }, (_, i) => [`u${i}`, { $ref: '#/definitions/wide' }])),
});

test('a definition counts once per use, just under and just over the cap', () => {
  // Each use: the $ref node, the definition node and its 99 properties = 101; plus the root.
  assert.equal(expansionProblem(sharedDefinition(198, 99)), undefined, `${1 + 198 * 101} subschemas`);
  assert.match(String(expansionProblem(sharedDefinition(199, 99))), new RegExp(`more than ${MAX_EXPANDED_SUBSCHEMAS.toLocaleString('en-US')} subschemas`));
});

test('unused definitions count nothing; recursion through any keyword is named with its place', () => {
  assert.equal(expansionProblem({ definitions: { big: sharedDefinition(300, 99) }, type: 'object' }), undefined);
  assert.match(String(expansionProblem({ items: { $ref: '#' } })), /the "\$ref" at "\/items\/\$ref" leads back into itself/);
  assert.match(String(expansionProblem({ definitions: { a: { anyOf: [{ $ref: '#/definitions/b' }] }, b: { not: { $ref: '#/definitions/a' } } }, $ref: '#/definitions/a' })), /leads back into itself/);
  assert.equal(expansionProblem({ properties: { 'a/b': { type: 'string' } }, $ref: '#/properties/a~1b' }), undefined, 'escaped pointers resolve');
});

test('a $ref may point only at a schema: through keywords, names under properties or definitions, items of allOf', () => {
  for (const ref of ['#', '#/definitions/a', '#/$defs/a~1b', '#/properties/a/items', '#/properties/a/items/0', '#/allOf/1/properties/x', '#/definitions/a/not', '#/patternProperties/%5Ea'])
    assert.equal(refProblem(ref), undefined, ref);
  const refused: Array<[string, RegExp]> = [
    ['#/x-p', /points into "x-p", which holds no schema/],
    ['#/default', /points into "default"/],
    ['#/properties/a/examples/0', /points into "examples"/],
    ['#/definitions', /ends where a name or index should follow/],
    ['#/allOf/first', /not an index of a schema list/],
    ['#/definitions/a#', /no other "#"/],
    ['#a', /must be "#" or a JSON pointer/],
    ['#/definitions/%E0', /malformed percent-escape/],
  ];
  for (const [ref, problem] of refused) assert.match(String(refProblem(ref)), problem, ref);
});
