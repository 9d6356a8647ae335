// `sluice sign`: the headers it prints pass the runtime's own Standard Webhooks verifier; a secret a
// source would refuse, or a timestamp that is not unix seconds, is refused with a message instead.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { verifyStandardWebhook } from '../runtime/ingest/verify-standard-webhooks.ts';
import { signCommand } from '../runtime/sign-command.ts';

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

/** The `-H name:value` arguments as a header map. */
const headersOf = (printed: string): Record<string, string> =>
  Object.fromEntries(printed.split(' -H ').map((part) => part.replace(/^-H /, '')).map((header) => [header.slice(0, header.indexOf(':')), header.slice(header.indexOf(':') + 1)]));

test('the printed headers verify against the same secret and body', () => {
  const body = '{"type":"payment.succeeded","data":{"amount":4200}}';
  const headers = headersOf(signCommand(['--secret', SECRET, '--id', 'msg_1', '--body', body], NOW));
  assert.equal(headers['webhook-timestamp'], String(NOW / 1000));
  assert.equal(verifyStandardWebhook(headers, Buffer.from(body), [SECRET], NOW).providerEventId, 'msg_1');
  assert.throws(() => verifyStandardWebhook(headers, Buffer.from(`${body} `), [SECRET], NOW), /No webhook signature matches/);
});

test('the secret may come from SLUICE_SIGNING_SECRET instead of --secret (out of ps)', () => {
  const args = ['--id', 'msg_1', '--body', '{}', '--timestamp', '1700000000'];
  assert.equal(signCommand(args, NOW, { SLUICE_SIGNING_SECRET: SECRET }), signCommand(['--secret', SECRET, ...args], NOW));
  assert.throws(() => signCommand(args, NOW, { SLUICE_SIGNING_SECRET: ' ' }), /usage: sluice sign/, 'a blank one is not set');
});

test('a secret a source would refuse and a timestamp that is not unix seconds are refused', () => {
  const sign = (...extra: string[]) => signCommand(['--id', 'msg_1', '--body', '{}', ...extra], NOW);
  assert.throws(() => sign('--secret', `whsec_${Buffer.alloc(8).toString('base64')}`), /at least 24 bytes; this one decodes to 8/);
  assert.throws(() => sign('--secret', 'whsec_***'), /must be base64/);
  // An unset shell variable, even with SLUICE_SIGNING_SECRET set: the flag given wins, and is named as empty.
  assert.throws(() => signCommand(['--id', 'msg_1', '--body', '{}', '--secret', ''], NOW, { SLUICE_SIGNING_SECRET: SECRET }), /The signing secret is empty/);
  assert.throws(() => sign('--secret', SECRET, '--timestamp', 'abc'), /--timestamp must be unix seconds/);
  assert.equal(headersOf(sign('--secret', SECRET, '--timestamp', '1700000000'))['webhook-timestamp'], '1700000000');
  assert.throws(() => signCommand(['--secret', SECRET], NOW), /usage: sluice sign/);
  // $HDRS is split on spaces: an id with one would break the printed arguments (and no source takes it).
  for (const id of ['msg 1', '', 'tab\there']) assert.throws(() => signCommand(['--secret', SECRET, '--id', id, '--body', '{}'], NOW), /--id must be 1-256 printable ASCII characters without spaces/, id);
});
