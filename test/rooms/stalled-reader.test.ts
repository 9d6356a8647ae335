// A live socket's reader counts as stalled after STALLED_BEATS heartbeats in a row with at least
// STALLED_BYTES queued and nothing drained; a drain or a small queue starts the count over.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { STALLED_BEATS, STALLED_BYTES, StalledReader } from '../../runtime/rooms/stalled-reader.ts';

const beats = (reader: StalledReader, count: number, buffered: number): boolean[] => Array.from({ length: count }, () => reader.beat(buffered));

test('a reader that takes nothing for STALLED_BEATS beats with a queue is stalled', () => {
  const reader = new StalledReader();
  const seen = beats(reader, STALLED_BEATS, 256 * 1024);
  assert.deepEqual(seen, [...Array<boolean>(STALLED_BEATS - 1).fill(false), true]);
});

test('a drain, or a queue below STALLED_BYTES, starts the count over', () => {
  const reader = new StalledReader();
  beats(reader, STALLED_BEATS - 1, 256 * 1024);
  reader.drained();
  assert.equal(reader.beat(256 * 1024), false, 'it read something since the last beat');
  assert.deepEqual(beats(reader, STALLED_BEATS, 256 * 1024), [...Array<boolean>(STALLED_BEATS - 1).fill(false), true], 'counted again from the drain');
  const idle = new StalledReader();
  assert.deepEqual(beats(idle, 3 * STALLED_BEATS, STALLED_BYTES - 1), Array<boolean>(3 * STALLED_BEATS).fill(false), 'a few heartbeats queued are not a stall');
});
