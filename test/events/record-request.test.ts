// A request's recording keeps the first 64 KiB of its body: a body cut there through a character
// keeps the text before that character (not a U+FFFD in its place); a body that fits is kept as sent.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RECORDING_BODY_CAP, recordRequest } from '../../runtime/events/record-request.ts';

const record = (body: Buffer) => recordRequest('POST', '/hooks/acct/in', {}, body, { scheme: 'standard', key_index: 0 }, '2026-12-05T00:00:00.000Z');

test('a body cut at the cap through a character keeps the text before it', () => {
  const cut = record(Buffer.from(`${'x'.repeat(RECORDING_BODY_CAP - 2)}😀 and more`));
  assert.equal(cut.body, 'x'.repeat(RECORDING_BODY_CAP - 2));
  assert.equal(cut.body_truncated, true);
  assert.equal(cut.body_bytes, RECORDING_BODY_CAP + 11);
});

test('a body within the cap is kept as sent, a byte-order mark and bytes that are not UTF-8 as Buffer decodes them', () => {
  const whole = Buffer.concat([Buffer.from('\uFEFF{"a":"é"}'), Buffer.from([0xc3])]);
  const kept = record(whole);
  assert.equal(kept.body, whole.toString('utf8'));
  assert.equal(kept.body_truncated, false);
});
