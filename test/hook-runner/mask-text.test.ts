// maskOccurrences against the plain definition (every occurrence found one position at a time,
// overlapping and touching ones merged), on many small texts over a two-letter alphabet where
// overlaps and periodic values are the rule, and on the hostile shape that once cost seconds.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { maskOccurrences } from '../../hook-runner/mask-text.ts';

/** The definition: mark every position of every occurrence, then one mask per run of marks. */
function maskByDefinition(text: string, values: readonly string[], mask: string): string {
  const covered = new Array<boolean>(text.length).fill(false);
  for (const value of values) {
    if (value === '') continue;
    for (let at = text.indexOf(value); at !== -1; at = text.indexOf(value, at + 1)) covered.fill(true, at, at + value.length);
  }
  let out = '';
  for (let i = 0; i < text.length; i += 1) {
    if (!covered[i]) out += text[i];
    else if (i === 0 || !covered[i - 1]) out += mask;
  }
  return out;
}

/** A small deterministic generator (mulberry32), so a failure names a case that can be run again. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('masks exactly what the definition masks, over 3,000 texts rich in overlaps', () => {
  const next = random(20261201);
  const word = (max: number): string => Array.from({ length: Math.floor(next() * max) }, () => (next() < 0.5 ? 'a' : 'b')).join('');
  for (let i = 0; i < 3000; i += 1) {
    const text = word(60);
    const values = Array.from({ length: 1 + Math.floor(next() * 3) }, () => word(7));
    assert.equal(maskOccurrences(text, values, '#'), maskByDefinition(text, values, '#'), `case ${i}: ${JSON.stringify({ text, values })}`);
  }
});

test('periodic values, values inside values, touching occurrences and UTF-16 pairs', () => {
  const cases: Array<[string, string[]]> = [
    ['abcabcabcab-abcab', ['abcab']],
    ['aabaabaa aabaaabaa', ['aabaa']],
    ['xxsecretsecretxx', ['secret']],
    ['key=topsecret;', ['secret', 'topsecret', 'nothere']],
    ['😀😀😀-😀', ['😀😀']],
    ['', ['a']],
    ['nothing here', ['', 'zzz']],
  ];
  for (const [text, values] of cases) assert.equal(maskOccurrences(text, values, '[m]'), maskByDefinition(text, values, '[m]'), JSON.stringify({ text, values }));
  assert.equal(maskOccurrences('xxsecretsecretxx', ['secret'], '[m]'), 'xx[m]xx');
});

test('a text that repeats a periodic value everywhere is one mask, for each of many such values', () => {
  const text = `{"x":"${'a'.repeat(256 * 1024)}"}`;
  const values = Array.from({ length: 25 }, (_, i) => 'a'.repeat(8 + i));
  assert.equal(maskOccurrences(text, values, '[redacted]'), '{"x":"[redacted]"}');
});

test('a text cut short masks the start of a value it ends with, from the given length on', () => {
  assert.equal(maskOccurrences('auth=Bearer PADSECRETtoken0123456789abcde', ['Bearer PADSECRETtoken0123456789abcdef'], '[m]', 4), 'auth=[m]');
  assert.equal(maskOccurrences('ends with Bear', ['Bearer s3cr3t'], '[m]', 4), 'ends with [m]');
  assert.equal(maskOccurrences('ends with Bea', ['Bearer s3cr3t'], '[m]', 4), 'ends with Bea', 'shorter than the minimum');
  assert.equal(maskOccurrences('abab', ['ababx'], '[m]', 4), '[m]', 'the longest start counts (a border of the value)');
  assert.equal(maskOccurrences('x secret y secr', ['secret'], '[m]', 4), 'x [m] y [m]', 'with whole occurrences');
  assert.equal(maskOccurrences('PADSECRET', ['PADSECRETtoken'], '[m]'), 'PADSECRET', 'without cutAtLeast nothing changes');
});
