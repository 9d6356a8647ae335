// Member names repeated within one JSON object are found, wherever they are; the same name in
// different objects, in arrays or inside string values is not a repeat.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { duplicateKeyAt } from '../../runtime/validation/duplicate-keys.ts';

test('a name repeated in one object is found at its second occurrence', () => {
  assert.equal(duplicateKeyAt('{"amount":99999,"amount":1}'), 16);
  assert.equal(duplicateKeyAt('{"a":{"b":1,"c":[{"d":1,"d":2}]}}'), 24);
  assert.equal(duplicateKeyAt('{"a\\u0062":1, "ab" :2}'), 14, 'names compare decoded');
  assert.equal(duplicateKeyAt('[{"x":1},{"y":{"z":0,"z":0}}]'), 21);
});

test('the same name in different objects, array items and string values are no repeat', () => {
  for (const text of ['{"a":1,"b":{"a":1},"c":[{"a":1},{"a":1}]}', '{"a":"a","b":["a","a"],"c":"\\"a\\":1,\\"a\\":2"}', '[]', '{}', '"a"', '{"":1,"x":{"":2}}', '{"a":[1,{"b":2}],"b":3}']) {
    assert.equal(duplicateKeyAt(text), -1, text);
  }
});
