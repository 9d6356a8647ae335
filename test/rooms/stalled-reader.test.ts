// A live socket's reader counts as stalled after STALLED_BEATS heartbeats in a row with at least
// STALLED_BYTES queued and nothing drained (while it replays: less than MIN_REPLAY_READ_BYTES); a
// drain of more, or a small queue, starts the count over.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MIN_REPLAY_READ_BYTES, STALLED_BEATS, STALLED_BYTES, StalledReader } from '../../runtime/rooms/stalled-reader.ts';

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

test('a replaying reader that takes a little at each beat, less than MIN_REPLAY_READ_BYTES, is stalled; one that takes more is not, its queue full all the while', () => {
  const queue = 256 * 1024;
  /** One beat of a replay that read `read` bytes since the last one, the pump filling its queue back to `queue`. */
  const replayBeat = (reader: StalledReader, read: number): boolean => {
    reader.sent(read);
    reader.drained();
    return reader.beat(queue, true);
  };
  const dripping = new StalledReader();
  assert.equal(dripping.beat(queue, true), false, 'the first beat with a full queue and nothing read: one stalled beat');
  assert.deepEqual(Array.from({ length: STALLED_BEATS - 1 }, () => replayBeat(dripping, 1024)), [...Array<boolean>(STALLED_BEATS - 2).fill(false), true]);
  const reading = new StalledReader();
  reading.beat(queue, true);
  assert.deepEqual(Array.from({ length: 3 * STALLED_BEATS }, () => replayBeat(reading, MIN_REPLAY_READ_BYTES)), Array<boolean>(3 * STALLED_BEATS).fill(false));
  // Live, on a topic whose frames are not counted: any drain is reading.
  const live = new StalledReader();
  assert.deepEqual(Array.from({ length: 3 * STALLED_BEATS }, () => (live.drained(), live.beat(queue))), Array<boolean>(3 * STALLED_BEATS).fill(false));
});
