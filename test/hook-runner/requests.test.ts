// Request parsers of the runner (pure): run ids from idempotency keys, uint64 fences, permission and
// secret-key rules, required secret keys (deduplicated, counted), simulate mode needing neither key
// nor fence, and Compile's org id.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCompileRequest, parseIdempotencyKey, parseInvokeRequest, REQUEST_LIMITS } from '../../hook-runner/requests.ts';
import { InvalidRequestError } from '../../hook-runner/runner-error.ts';
import type { InvokeRequestWire } from '../../hook-runner/wire.ts';

const request = (overrides: Partial<InvokeRequestWire> = {}): InvokeRequestWire => ({
  org_id: 'org_1', action_id: 'act_1', digest: 'a'.repeat(64), permissions: [], payload_json: '{}',
  idempotency_key: 'run:step', fence: '1', simulate: false, required_secret_keys: [], ...overrides,
});

const invalidField = (field: string) => (error: unknown): boolean => {
  assert.ok(error instanceof InvalidRequestError, String(error));
  assert.equal(error.field, field);
  return true;
};

describe('invoke request parsing', () => {
  it('takes the run id from before the last colon', () => {
    assert.deepEqual(parseIdempotencyKey('run:1:step'), { idempotencyKey: 'run:1:step', runId: 'run:1' });
    for (const bad of ['', 'nocolon', ':step', 'run:', 'run :step', `${'r'.repeat(256)}:s`]) {
      assert.throws(() => parseIdempotencyKey(bad), invalidField('idempotency_key'), bad);
    }
  });

  it('parses fences as uint64 and requires at least 1 for recorded invocations', () => {
    const max = '18446744073709551615';
    const parsed = parseInvokeRequest(request({ fence: max }));
    assert.equal(parsed.mode.kind === 'recorded' && parsed.mode.fence, 2n ** 64n - 1n);
    for (const bad of ['0', '18446744073709551616', '-1', '1.5', '']) {
      assert.throws(() => parseInvokeRequest(request({ fence: bad })), invalidField('fence'), bad);
    }
  });

  it('collects read_secret keys once, in order, and validates them', () => {
    const parsed = parseInvokeRequest(request({ permissions: ['read_secret:B', 'emit_event:order.created', 'read_secret:A', 'read_secret:B'] }));
    assert.deepEqual(parsed.secretKeys, ['B', 'A']);
    assert.deepEqual(parsed.permissions, ['read_secret:B', 'emit_event:order.created', 'read_secret:A', 'read_secret:B']);
    assert.throws(() => parseInvokeRequest(request({ permissions: ['read_secret:'] })), invalidField('permissions[0]'));
    assert.throws(() => parseInvokeRequest(request({ permissions: [`read_secret:${'K'.repeat(65)}`] })), invalidField('permissions[0]'));
  });

  it('takes required secret keys only among those a read_secret permission names, and none when simulating', () => {
    const permissions = ['read_secret:A', 'read_secret:B'];
    assert.deepEqual(parseInvokeRequest(request({ permissions, required_secret_keys: ['B'] })).requiredSecretKeys, ['B']);
    assert.throws(() => parseInvokeRequest(request({ permissions, required_secret_keys: ['A', 'C'] })), invalidField('required_secret_keys[1]'));
    assert.throws(() => parseInvokeRequest(request({ permissions, required_secret_keys: ['a'] })), invalidField('required_secret_keys[0]'));
    assert.deepEqual(parseInvokeRequest(request({ permissions, simulate: true, required_secret_keys: ['A'] })).requiredSecretKeys, []);
  });

  it('keeps a required secret key named twice once, and refuses more keys than a call has permissions before reading any', () => {
    const permissions = ['read_secret:A', 'read_secret:B'];
    assert.deepEqual(parseInvokeRequest(request({ permissions, required_secret_keys: ['B', 'A', 'B', 'A'] })).requiredSecretKeys, ['B', 'A']);
    const many = Array.from({ length: REQUEST_LIMITS.maxRequiredSecretKeys + 1 }, () => 'A');
    assert.throws(() => parseInvokeRequest(request({ permissions, required_secret_keys: many })), invalidField('required_secret_keys'));
  });

  it('needs neither idempotency key nor fence to simulate', () => {
    assert.deepEqual(parseInvokeRequest(request({ simulate: true, idempotency_key: '', fence: '0' })).mode, { kind: 'simulate' });
  });

  it('accepts any JSON value as payload, verbatim', () => {
    for (const payload of ['null', '42', '"text"', '[1,2]', ' {"a": 1.0} ']) {
      assert.equal(parseInvokeRequest(request({ payload_json: payload })).payloadJson, payload);
    }
    assert.throws(() => parseInvokeRequest(request({ payload_json: '' })), invalidField('payload_json'));
  });
});

describe('compile request parsing', () => {
  const compile = (org_id: string) => ({ wasm: new Uint8Array([0, 97, 115, 109]), org_id, restore: false });

  it('takes an org id as Invoke does, or none (a turn of its own)', () => {
    assert.equal(parseCompileRequest(compile('org_1')).tenant, 'org_1');
    assert.equal(parseCompileRequest(compile('')).tenant, '');
    for (const bad of [`org\u0000/../x`, 'x'.repeat(REQUEST_LIMITS.maxIdLength + 1), ' org']) {
      assert.throws(() => parseCompileRequest(compile(bad)), invalidField('org_id'), JSON.stringify(bad));
    }
  });
});
