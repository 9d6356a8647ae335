// What the CLI prints of text from elsewhere: characters a terminal acts on, and characters that
// show as nothing, come out as \u escapes; everything visible is left as it is.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { printable } from '../runtime/terminal-text.ts';

test('controls, separators and bidi overrides are escaped', () => {
  assert.equal(printable('a\u001b[2Jb\u0007\u009b\u007f'), 'a\\u001b[2Jb\\u0007\\u009b\\u007f');
  assert.equal(printable('x\u2028y\u202eevil\u2066'), 'x\\u2028y\\u202eevil\\u2066');
  assert.equal(printable('line\nnext\ttab'), 'line\\u000anext\\u0009tab');
});

test('characters that show as nothing are escaped, so two ids that print alike are alike', () => {
  assert.equal(printable('acct\u200b-lumen'), 'acct\\u200b-lumen');
  assert.equal(printable('\ufeffrun_1\u200d\u2060\u00ad'), '\\ufeffrun_1\\u200d\\u2060\\u00ad');
  assert.notEqual(printable('acct-lumen'), printable('acct-\u200clumen'));
});

test('visible text is left as it is, non-ASCII included', () => {
  const visible = 'Zahlung fehlgeschlagen: café ✓ 支払い 🚀 "quoted" \\ back\\slash';
  assert.equal(printable(visible), visible);
});
