// The binary min-heap the webhook socket turns are kept in (org-socket-share.ts).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MinHeap } from '../../actors/min-heap.ts';

test('pops in order of the comparison, ties in whatever order, and empty gives undefined', () => {
  const heap = new MinHeap<number>((a, b) => a < b);
  const values = Array.from({ length: 500 }, (_, i) => (i * 7919) % 503);
  for (const value of values) heap.push(value);
  assert.equal(heap.size, 500);
  const popped: number[] = [];
  for (let value = heap.pop(); value !== undefined; value = heap.pop()) popped.push(value);
  assert.deepEqual(popped, [...values].sort((a, b) => a - b));
  assert.equal(heap.pop(), undefined);
});

test('rebuild keeps only what it is told to, still in order', () => {
  const heap = new MinHeap<number>((a, b) => a < b);
  for (const value of [9, 3, 7, 1, 8, 2]) heap.push(value);
  heap.rebuild((value) => value % 2 === 1);
  assert.deepEqual([heap.pop(), heap.pop(), heap.pop(), heap.pop(), heap.pop()], [1, 3, 7, 9, undefined]);
});
