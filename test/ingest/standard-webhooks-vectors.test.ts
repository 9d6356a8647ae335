// The public Standard Webhooks vectors from shared/testdata, run through Sluice's verifier
// with the clock pinned to each vector's timestamp.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { SluiceError } from '../../runtime/errors.ts';
import { verifyStandardWebhook } from '../../runtime/ingest/verify-standard-webhooks.ts';
import { assertSecretsFit } from '../../runtime/sources/source-record.ts';

interface Vector {
  secret: string;
  msg_id: string;
  timestamp: number | string;
  payload?: string;
  payload_repeat?: { char: string; count: number };
  signature: string;
  valid: boolean;
  note: string;
  scheme?: string;
}

const dir = resolve(import.meta.dirname, '../../../shared/testdata');
const load = (file: string): Vector[] => JSON.parse(readFileSync(resolve(dir, file), 'utf8')) as Vector[];
const vectors = [...load('standard-webhooks-vectors.json'), ...load('standard-webhooks-vectors-large.json')];

function verify(vector: Vector): boolean {
  const payload = vector.payload ?? vector.payload_repeat!.char.repeat(vector.payload_repeat!.count);
  const headers = { 'webhook-id': vector.msg_id, 'webhook-timestamp': String(vector.timestamp), 'webhook-signature': vector.signature };
  try {
    verifyStandardWebhook(headers, Buffer.from(payload, 'utf8'), [vector.secret], Number(vector.timestamp) * 1000);
    return true;
  } catch (error) {
    assert.ok(error instanceof SluiceError, 'a rejected vector fails with a typed error');
    assert.equal(error.status, 401, `${vector.note}: rejection is a 401`);
    return false;
  }
}

test('every symmetric (v1) vector verifies exactly when it is marked valid', () => {
  const symmetric = vectors.filter((v) => v.scheme !== 'v1a');
  assert.ok(symmetric.length >= 20);
  for (const vector of symmetric) assert.equal(verify(vector), vector.valid, vector.note);
});

test('asymmetric (v1a, ed25519) vectors are refused: sources hold HMAC secrets only', () => {
  const asymmetric = vectors.filter((v) => v.scheme === 'v1a');
  assert.ok(asymmetric.length >= 2);
  for (const vector of asymmetric) {
    assert.equal(verify(vector), false, vector.note);
    assert.throws(() => assertSecretsFit('standard-webhooks', [vector.secret]), /base64/);
  }
});

test('a vector key shorter than 24 bytes verifies, but a source refuses to store it', () => {
  const short = vectors.find((v) => v.secret === 'whsec_plJ3nmyCDGBKInavdOK15jsl');
  assert.ok(short !== undefined);
  assert.equal(verify(short), true);
  assert.throws(() => assertSecretsFit('standard-webhooks', [short.secret]), (error: unknown) => {
    assert.ok(error instanceof SluiceError);
    assert.equal(error.code, 'secret_too_short');
    assert.equal(error.field, 'secrets[0]');
    return true;
  });
});

test('the timestamp tolerance is ±300 s around the injected clock', () => {
  const vector = vectors.find((v) => v.valid && v.scheme === undefined && v.payload !== undefined)!;
  const at = Number(vector.timestamp) * 1000;
  const headers = { 'webhook-id': vector.msg_id, 'webhook-timestamp': String(vector.timestamp), 'webhook-signature': vector.signature };
  const body = Buffer.from(vector.payload!, 'utf8');
  for (const offset of [-300_000, 0, 300_000]) verifyStandardWebhook(headers, body, [vector.secret], at + offset);
  for (const offset of [-301_000, 301_000]) {
    assert.throws(() => verifyStandardWebhook(headers, body, [vector.secret], at + offset), /more than 300 seconds/);
  }
});

test('a signature header sent as two lines (joined with ", ") verifies whichever line holds the match', () => {
  const vector = vectors.find((v) => v.valid && v.scheme === undefined && v.payload !== undefined && !v.signature.includes(' '))!;
  const at = Number(vector.timestamp) * 1000;
  const body = Buffer.from(vector.payload!, 'utf8');
  const wrong = `v1,${Buffer.alloc(32, 7).toString('base64')}`;
  for (const joined of [`${vector.signature}, ${wrong}`, `${wrong}, ${vector.signature}`, `${vector.signature},`]) {
    const headers = { 'webhook-id': vector.msg_id, 'webhook-timestamp': String(vector.timestamp), 'webhook-signature': joined };
    assert.equal(verifyStandardWebhook(headers, body, [vector.secret], at).keyIndex, 0, joined);
  }
});

test('rotation: a delivery verifies against any active secret, and reports which one', () => {
  const vector = vectors.find((v) => v.valid && v.secret.startsWith('whsec_Mf') && v.payload !== undefined)!;
  const headers = { 'webhook-id': vector.msg_id, 'webhook-timestamp': String(vector.timestamp), 'webhook-signature': vector.signature };
  const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  const result = verifyStandardWebhook(headers, Buffer.from(vector.payload!), [other, vector.secret], Number(vector.timestamp) * 1000);
  assert.equal(result.keyIndex, 1);
  assert.equal(result.providerEventId, vector.msg_id);
});

test('a secret that is not base64 signs nothing: a signature made with an empty key is refused, and the next secret still verifies', () => {
  const body = Buffer.from('{"type":"x.y"}');
  const at = Date.UTC(2026, 11, 1);
  const timestamp = String(Math.floor(at / 1000));
  const emptyKeySignature = `v1,${createHmac('sha256', Buffer.alloc(0)).update(`msg_1.${timestamp}.`).update(body).digest('base64')}`;
  const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': timestamp, 'webhook-signature': emptyKeySignature };
  for (const secret of ['stripe secret: not base64!', 'whsec_']) {
    assert.throws(() => verifyStandardWebhook(headers, body, [secret], at), { status: 401, code: 'invalid_signature' }, secret);
  }
  const good = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
  const signature = `v1,${createHmac('sha256', Buffer.alloc(32, 3)).update(`msg_1.${timestamp}.`).update(body).digest('base64')}`;
  assert.equal(verifyStandardWebhook({ ...headers, 'webhook-signature': signature }, body, ['not base64!', good], at).keyIndex, 1);
});
