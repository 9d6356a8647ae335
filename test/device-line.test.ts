// idFirst (runtime/device-line.ts): a line `sluice device` sends opens with its id, as Sluice reads
// a back-pressure nack's id from a frame's first bytes (leadingFrameId), and means what was typed.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { idFirst } from '../runtime/device-line.ts';
import { leadingFrameId } from '../runtime/triggers/device-frame.ts';

const leading = (text: string): string | null | undefined => leadingFrameId(Buffer.from(text), false);

test('an id typed after other members is moved first; each member keeps its text (a number past 2^53 as written)', () => {
  const line = '{ "type": "reading.taken", "payload": {"n": 12345678901234567890, "s": "a,b}"}, "id" : "r-1" }';
  const sent = idFirst(line);
  assert.equal(sent, '{"id":"r-1","type":"reading.taken","payload":{"n": 12345678901234567890, "s": "a,b}"}}');
  assert.equal(leading(line), undefined, 'as typed, its id would take a parse');
  assert.equal(leading(sent), 'r-1');
  assert.deepEqual(JSON.parse(sent), JSON.parse(line));
});

test('a repeated id is sent once, with the value JSON.parse keeps (the last): the id read first is the message\'s', () => {
  const sent = idFirst('{"id":"first","type":"t","id":"last"}');
  assert.equal(sent, '{"id":"last","type":"t"}');
  assert.equal(leading(sent), JSON.parse(sent).id);
});

test('a name typed with escapes is written plainly, so the opening is the one Sluice looks for', () => {
  const sent = idFirst('{"\\u0069d":"e-1","type":"t"}');
  assert.equal(sent, '{"id":"e-1","type":"t"}');
  assert.equal(leading(sent), 'e-1');
});

test('a line that opens with its id, names no string id, or is no JSON object is sent as typed', () => {
  for (const line of ['{"id":"a","type":"t"}', '{"type":"t","id":7}', '{"type":"t"}', '["id","x"]', 'not json', '{"type":"t",', 'null']) {
    assert.equal(idFirst(line), line, line);
  }
});
