// The validator cache: a source's new version replaces its old validator instead of adding one,
// and the least recently used go first once the count or the schemas' total size is past its bound.
// (Schemas are capped at 64 KiB, far below the cache's byte bound.)

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ValidateFunction } from 'ajv';
import { ValidatorCache } from '../../runtime/sources/validator-cache.ts';

const validator = (name: string): ValidateFunction => Object.assign(() => true, { schema: { title: name } }) as unknown as ValidateFunction;

test('a new source version replaces the old validator; an old version reads as absent', () => {
  const cache = new ValidatorCache(10, 1000);
  const v1 = validator('v1');
  cache.set('org/src/a.b', '2026-01-01', v1, 100);
  assert.equal(cache.get('org/src/a.b', '2026-01-01'), v1);
  cache.set('org/src/a.b', '2026-02-01', validator('v2'), 120);
  assert.equal(cache.get('org/src/a.b', '2026-01-01'), undefined);
  assert.deepEqual([cache.size, cache.bytes], [1, 120], 'one entry: PATCHing a source does not grow the cache');
});

test('past the count or the byte bound, the least recently used validators go first', () => {
  const cache = new ValidatorCache(3, 250);
  for (const key of ['a', 'b', 'c']) cache.set(key, 'v', validator(key), 50);
  assert.ok(cache.get('a', 'v'), 'a is now the most recently used');
  cache.set('d', 'v', validator('d'), 50);
  assert.equal(cache.get('b', 'v'), undefined, 'b went: over the count');
  assert.deepEqual([cache.size, cache.bytes], [3, 150]);
  cache.set('big', 'v', validator('big'), 200);
  assert.deepEqual([cache.get('c', 'v'), cache.get('a', 'v')], [undefined, undefined], 'c and a went: over the bytes');
  assert.ok(cache.get('big', 'v') && cache.get('d', 'v'));
  assert.deepEqual([cache.size, cache.bytes], [2, 250]);
});
