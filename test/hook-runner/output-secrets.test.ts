// The runner's masking of secrets in guest outputs (hook-runner/output-secrets.ts) on its own: every
// given secret of 8 characters or more reads "[redacted]" wherever it is in a string, raw or
// JSON-escaped, overlapping ones masked whole; one it cannot mask (outside a string, in an object
// key, in another escaping) turns the output into a secret_in_output trap; short values, other
// outcomes and outputs without a secret pass unchanged.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InvocationResult } from '../../hook-runner/invocation-outcome.ts';
import { maskSecrets } from '../../hook-runner/output-secrets.ts';
import { SLICE_MS, WorkSlices } from '../../hook-runner/work-slices.ts';
import { countTurns } from '../helpers/loop-turns.ts';

const output = (outputJson: string): InvocationResult => ({ outcome: { kind: 'output', outputJson }, fuelUsed: 7 });

test('a secret reads [redacted] in string values, raw or JSON-escaped, and the output stays a JSON document', async () => {
  const secrets = { TOKEN: 'tok_12345678', LONGER: 'tok_12345678_and_more', QUOTED: 'a"b\\c-long' };
  const masked = await maskSecrets(output('{"t":"tok_12345678","x":"x tok_12345678_and_more y","q":"a\\"b\\\\c-long","n":1}'), secrets);
  assert.deepEqual(masked, output('{"t":"[redacted]","x":"x [redacted] y","q":"[redacted]","n":1}'));
});

test('overlapping secrets are masked whole: no part of one stays beside the mask of the other', async () => {
  const masked = await maskSecrets(output('{"s":"XXXXXXXXAAAABBBBBBBB!"}'), { A: 'XXXXXXXXAAAA', B: 'AAAABBBBBBBB' });
  assert.deepEqual(masked, output('{"s":"[redacted]!"}'));
});

test('a secret in an object key, or escaped otherwise than JSON.stringify escapes it, fails the output', async () => {
  const secrets = { KEY: 'sk_live/AbCd+1234' };
  for (const text of ['{"sk_live/AbCd+1234":1}', '{"s":"sk_live\\/AbCd+1234"}', '{"s":"\\u0073k_live/AbCd+1234"}']) {
    const masked = await maskSecrets(output(text), secrets);
    assert.equal(masked.outcome.kind === 'trap' && masked.outcome.trap, 'secret_in_output', text);
    assert.doesNotMatch(JSON.stringify(masked), /AbCd/, text);
  }
});

test('a secret written where masking would break the JSON (a number) fails the output: nothing of it is kept', async () => {
  const masked = await maskSecrets(output('{"pin":1234567890}'), { PIN: '1234567890' });
  assert.equal(masked.outcome.kind, 'trap');
  assert.equal(masked.outcome.kind === 'trap' && masked.outcome.trap, 'secret_in_output');
  assert.doesNotMatch(JSON.stringify(masked), /1234567890/);
  assert.equal(masked.fuelUsed, 7);
});

test('a secret whose raw text spans JSON structure fails the output, never masks members away', async () => {
  for (const [text, secret] of [['{"a":"x","b":"y","c":1}', 'x","b":"y'], ['{"list":["tok","en12345"]}', 'tok","en12345']]) {
    const masked = await maskSecrets(output(text!), { S: secret! });
    assert.equal(masked.outcome.kind === 'trap' && masked.outcome.trap, 'secret_in_output', text);
    assert.match(masked.outcome.kind === 'trap' ? masked.outcome.message : '', /across JSON strings/);
  }
});

test('short secrets, outputs without a secret and outcomes other than output pass as they are', async () => {
  const plain = output('{"threshold":50,"note":"all fine"}');
  assert.equal(await maskSecrets(plain, { RISK_THRESHOLD: '50' }), plain, 'under 8 characters: not masked');
  assert.equal(await maskSecrets(plain, { API_KEY: 'sk_live_abcdefgh' }), plain);
  const trap: InvocationResult = { outcome: { kind: 'trap', trap: 'out_of_fuel', message: 'sk_live_abcdefgh' }, fuelUsed: 1 };
  assert.equal(await maskSecrets(trap, { API_KEY: 'sk_live_abcdefgh' }), trap);
});

test('an output nested 100,000 deep is walked without recursion: a secret at the bottom is masked, one in a key deep down fails it', async () => {
  const depth = 100_000;
  const deep = (inner: string): string => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;
  const masked = await maskSecrets(output(deep('"x sk_live_abcdefgh"')), { API_KEY: 'sk_live_abcdefgh' });
  assert.deepEqual(masked, output(deep('"x [redacted]"')));
  const inKey = await maskSecrets(output(deep('{"sk_live_abcdefgh":1}')), { API_KEY: 'sk_live_abcdefgh' });
  assert.equal(inKey.outcome.kind === 'trap' && inKey.outcome.trap, 'secret_in_output');
  const plain = output(deep('"nothing"'));
  assert.equal(await maskSecrets(plain, { API_KEY: 'sk_live_abcdefgh' }), plain);
});

test('the scans run in slices with turns of the event loop between them (the org picks output and secrets: 25 near-misses over 256 KiB), and answer as in one go', async () => {
  const secrets = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`S${i}`, `${'a'.repeat(1000 + i)}b`]));
  const hostile = output(JSON.stringify({ s: 'a'.repeat(256 * 1024 - 16) }));
  let clock = 0;
  // Every check finds its slice used up: the work yields after each scan.
  const slices = new WorkSlices(() => (clock += SLICE_MS));
  const turns = countTurns();
  const masked = await maskSecrets(hostile, secrets, slices).finally(turns.stop);
  assert.equal(masked, hostile, 'no secret in it: the output as it was');
  assert.ok(turns.count() >= 25, `other work ran between the scans (${turns.count()} turns)`);
  const withOne = output(JSON.stringify({ s: `x${secrets['S3']}y` }));
  assert.deepEqual(await maskSecrets(withOne, secrets, new WorkSlices(() => (clock += SLICE_MS))), output('{"s":"x[redacted]y"}'));
});
