// The nesting cap on JSON text: counts objects and arrays, never brackets inside strings.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseActionOutput } from '../../runtime/actions/output-contract.ts';
import { MAX_JSON_NESTING, nestsDeeperThan } from '../../runtime/validation/json-nesting.ts';

test('depth counts nested objects and arrays up to the limit, and one more is too deep', () => {
  assert.equal(nestsDeeperThan('[]', 1), false);
  assert.equal(nestsDeeperThan('[[]]', 1), true);
  assert.equal(nestsDeeperThan('{"a":[{"b":1}]}', 3), false);
  assert.equal(nestsDeeperThan('{"a":[{"b":1}]}', 2), true);
  assert.equal(nestsDeeperThan('[[],[],[[]]]', 3), false);
  assert.equal(nestsDeeperThan(`${'['.repeat(MAX_JSON_NESTING)}${']'.repeat(MAX_JSON_NESTING)}`), false);
  assert.equal(nestsDeeperThan(`${'['.repeat(MAX_JSON_NESTING + 1)}${']'.repeat(MAX_JSON_NESTING + 1)}`), true);
});

test('brackets inside strings, escaped quotes and escaped backslashes do not count', () => {
  assert.equal(nestsDeeperThan('["[[[[{{{{"]', 1), false);
  assert.equal(nestsDeeperThan('["a\\"[[[[", "b"]', 1), false);
  assert.equal(nestsDeeperThan('["a\\\\", [[]]]', 2), true);
  assert.equal(nestsDeeperThan('{"k\\"[": "v"}', 1), false);
});

test('an action output nested too deep fails the output contract, naming the output', () => {
  const deep = `{"data":${'['.repeat(MAX_JSON_NESTING)}${']'.repeat(MAX_JSON_NESTING)}}`;
  assert.throws(() => parseActionOutput(deep), (error: Error & { field?: string }) => error.field === 'output' && /128 levels/.test(error.message));
  assert.equal(parseActionOutput(`{"data":${'['.repeat(10)}${']'.repeat(10)}}`).projection, null);
});
