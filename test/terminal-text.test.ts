// What the CLI prints of text from elsewhere: characters a terminal acts on, and characters that
// show as nothing, come out as \u escapes; everything visible is left as it is.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { printable, printableJson } from '../runtime/terminal-text.ts';

test('controls, separators and bidi controls are escaped', () => {
  assert.equal(printable('a\u001b[2Jb\u0007\u009b\u007f'), 'a\\u001b[2Jb\\u0007\\u009b\\u007f');
  assert.equal(printable('x\u2028y\u202eevil\u2066\u061c'), 'x\\u2028y\\u202eevil\\u2066\\u061c');
  assert.equal(printable('line\nnext\ttab'), 'line\\u000anext\\u0009tab');
});

test('characters that show as nothing are escaped: hidden text and look-alike ids show', () => {
  assert.equal(printable('acct\u200b-lumen'), 'acct\\u200b-lumen');
  assert.equal(printable('\ufeffrun_1\u2060\u00ad\u3164\u034f'), '\\ufeffrun_1\\u2060\\u00ad\\u3164\\u034f');
  // Tag characters spell ASCII no one sees ("hi" here): each is one code point, escaped whole.
  assert.equal(printable('ok\u{e0068}\u{e0069}'), 'ok\\u{e0068}\\u{e0069}');
  assert.equal(printable('a\ud800b'), 'a\\ud800b', 'a lone surrogate');
});

test('visible text is left as it is: non-ASCII, emoji sequences, joiners that shape a script', () => {
  const visible = 'Zahlung fehlgeschlagen: café ✓ 支払い 🚀 👨\u200d👩\u200d👧 ☺\ufe0f می\u200cخواهم "q" \\ back\\slash';
  assert.equal(printable(visible), visible);
});

test('JSON text keeps being JSON: escapes are JSON\'s own, astral characters as their two UTF-16 units', () => {
  const value = { note: 'a\u009b2J\u202eb\u2028c\u{e0041}d\\u0000', n: 1 };
  const shown = printableJson(JSON.stringify(value));
  assert.equal(shown, '{"note":"a\\u009b2J\\u202eb\\u2028c\\udb40\\udc41d\\\\u0000","n":1}');
  assert.deepEqual(JSON.parse(shown), value);
});
