// Received JSON handed on verbatim: a member's exact text cut from its document, and RawJson values
// written as their text by stringifyWithRaw, even where a string looks like the placeholder.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { memberText } from '../../runtime/validation/json-member-text.ts';
import { RawJson, stringifyWithRaw } from '../../runtime/validation/raw-json.ts';

test('memberText cuts the exact text of a top-level member, whatever its kind and surroundings', () => {
  const doc = ' { "type" : "a.b" ,\n "payload" :\t{"id":820982911946154508,"s":"}\\"{","a":[1e400,[{}]]} , "id":"x" } ';
  assert.equal(memberText(doc, 'payload'), '{"id":820982911946154508,"s":"}\\"{","a":[1e400,[{}]]}');
  assert.equal(memberText(doc, 'type'), '"a.b"');
  assert.equal(memberText(doc, 'id'), '"x"');
  assert.equal(memberText(doc, 'missing'), undefined);
  assert.equal(memberText('{"payload":-12.5e-3}', 'payload'), '-12.5e-3');
  assert.equal(memberText('{"payload":null,"payload":true}', 'payload'), 'true', 'the last of a repeated name, as JSON.parse');
  assert.equal(memberText('{"pay\\u006coad":7}', 'payload'), '7', 'names are compared decoded');
  assert.equal(memberText('[1,2]', 'payload'), undefined);
  for (const text of [memberText(doc, 'payload'), memberText(doc, 'type')]) assert.doesNotThrow(() => JSON.parse(text!));
});

test('stringifyWithRaw writes each RawJson as its text, and nothing else changes', () => {
  const value = { a: new RawJson('{"id":820982911946154508}'), b: ['\u0000not-a-marker:0', new RawJson('1e400')], c: 'plain' };
  assert.equal(stringifyWithRaw(value), '{"a":{"id":820982911946154508},"b":["\\u0000not-a-marker:0",1e400],"c":"plain"}');
  assert.equal(stringifyWithRaw({ n: 1, s: 'x' }), JSON.stringify({ n: 1, s: 'x' }));
  assert.equal(stringifyWithRaw(new RawJson('"$&$1"')), '"$&$1"', 'replacement patterns in the text are not interpreted');
});
