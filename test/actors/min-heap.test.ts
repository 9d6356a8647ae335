// The binary min-heap the webhook socket turns (org-socket-share.ts) and run timers (run-timers.ts) are kept in.

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

test('peek leaves the least in; replaceWith holds the given entries instead; clear empties it', () => {
  const heap = new MinHeap<number>((a, b) => a < b);
  assert.equal(heap.peek(), undefined);
  for (const value of [5, 2, 8]) heap.push(value);
  assert.deepEqual([heap.peek(), heap.size], [2, 3]);
  heap.replaceWith([9, 4, 6]);
  assert.deepEqual([heap.pop(), heap.pop(), heap.pop(), heap.pop()], [4, 6, 9, undefined]);
  heap.push(1);
  heap.clear();
  assert.deepEqual([heap.size, heap.pop()], [0, undefined]);
});
