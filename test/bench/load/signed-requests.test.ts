// The bench's request signer against the public Standard Webhooks vectors and the reference
// `standardwebhooks` package, and the pool file round trip both load generators rely on.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import {
  buildEventPayload,
  createSigningSecret,
  decodeSigningSecret,
  EVENT_TYPE,
  readRequestPool,
  signStandardWebhook,
  writeRequestPool,
} from '../../../bench/load/signed-requests.ts';

interface Vector {
  readonly secret: string;
  readonly msg_id: string;
  readonly timestamp: number;
  readonly payload?: string;
  readonly signature: string;
  readonly valid: boolean;
  readonly scheme?: string;
  readonly note: string;
}

const vectors = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../../../shared/testdata/standard-webhooks-vectors.json'), 'utf8')) as Vector[];

describe('signStandardWebhook', () => {
  const signable = vectors.filter((v) => v.valid && v.scheme === undefined && v.payload !== undefined && v.signature.startsWith('v1,'));

  it('reproduces every valid v1 vector', () => {
    assert.ok(signable.length >= 3, 'the vector file has valid v1 vectors');
    for (const v of signable) {
      const mine = signStandardWebhook(decodeSigningSecret(v.secret), v.msg_id, String(v.timestamp), v.payload ?? '');
      assert.ok(v.signature.split(' ').includes(mine), v.note);
    }
  });

  it('signs what the standardwebhooks package verifies', () => {
    const secret = createSigningSecret();
    assert.ok(decodeSigningSecret(secret).length >= 24);
    const body = buildEventPayload('msg_x', 1024);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const headers = { 'webhook-id': 'msg_x', 'webhook-timestamp': timestamp, 'webhook-signature': signStandardWebhook(decodeSigningSecret(secret), 'msg_x', timestamp, body) };
    assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body));
  });
});

describe('buildEventPayload', () => {
  it('is exactly the asked size, JSON, with the event type', () => {
    for (const bytes of [256, 1024, 4096]) {
      const body = buildEventPayload('msg_1', bytes);
      assert.equal(Buffer.byteLength(body), bytes);
      assert.equal((JSON.parse(body) as { type: string }).type, EVENT_TYPE);
    }
  });

  it('refuses a size smaller than the event skeleton', () => {
    assert.throws(() => buildEventPayload('msg_1', 10), RangeError);
  });
});

describe('request pool', () => {
  it('round-trips unique, verifiable requests', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-pool-test-'));
    try {
      const secret = createSigningSecret();
      const file = join(dir, 'pool.tsv');
      const nowSec = Math.floor(Date.now() / 1000);
      writeRequestPool({ file, count: 5000, idPrefix: 't', secret, payloadBytes: 1024, nowSec });
      const pool = readRequestPool(file);
      assert.equal(pool.length, 5000);
      assert.equal(new Set(pool.map((r) => r.id)).size, 5000, 'ids are unique');
      const webhook = new Webhook(secret);
      for (const r of [pool[0], pool[4096], pool[4999]]) {
        assert.ok(r !== undefined);
        assert.equal(r.timestamp, String(nowSec));
        webhook.verify(r.body, { 'webhook-id': r.id, 'webhook-timestamp': r.timestamp, 'webhook-signature': r.signature });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
