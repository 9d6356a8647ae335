// The hook-runner over real gRPC with the real addon: compile + invoke round trip, request
// validation (INVALID_ARGUMENT with the field), unknown digests (NOT_FOUND), health.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccessError, InputError } from '../../runtime/errors.ts';
import { invocation, parseOutput, type RunnerFixture, startRunnerWithEcho } from '../helpers/hook-runner.ts';
import { assembleWat, constantWat, HOSTILE_WAT, REJECT_WAT } from '../helpers/hook-runner-wat.ts';

let runner: RunnerFixture;
let echo: string;

before(async () => ({ runner, echo } = await startRunnerWithEcho()));
after(() => runner.close());

const rejectsWith = async (promise: Promise<unknown>, check: (error: InputError) => void): Promise<void> => {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof InputError, `expected InputError, got ${String(error)}`);
    assert.equal(error.status, 400);
    check(error);
    return true;
  });
};

describe('compile', () => {
  it('returns the sha256 of the bytes, the same on a second compile', async () => {
    const bytes = await assembleWat('constant', constantWat('{"ok":true}'));
    const { createHash } = await import('node:crypto');
    const digest = await runner.client.compile(bytes);
    assert.equal(digest, createHash('sha256').update(bytes).digest('hex'));
    assert.equal(await runner.client.compile(bytes), digest);
  });

  it('refuses garbage and imports with INVALID_ARGUMENT naming the reason', async () => {
    await rejectsWith(runner.client.compile(new Uint8Array([0, 97, 115, 109, 9, 9, 9, 9])), (error) => {
      assert.equal(error.field, 'wasm');
      assert.match(error.message, /Invalid module/);
    });
    await rejectsWith(runner.client.compile(await assembleWat('wasi', HOSTILE_WAT.wasiImport)), (error) => {
      assert.equal(error.code, 'imports_not_allowed');
      assert.match(error.message, /import/i);
    });
    await rejectsWith(runner.client.compile(new Uint8Array(0)), (error) => assert.equal(error.field, 'wasm'));
  });

  it('refuses an org id that is not an id (long, NUL, slashes) with INVALID_ARGUMENT naming org_id', async () => {
    const bytes = await assembleWat('constant', constantWat('{"org":true}'));
    for (const orgId of [`${'x'.repeat(4_000_000)}\u0000/../`, 'org/../other']) {
      await rejectsWith(runner.client.compile(bytes, orgId), (error) => assert.equal(error.field, 'org_id', error.message));
    }
    assert.match(await runner.client.compile(bytes, 'org_ok'), /^[0-9a-f]{64}$/);
  });
});

/** Appends a custom section (ignored by engines) so a valid module reaches `totalBytes`. */
function padModule(bytes: Uint8Array, totalBytes: number): Uint8Array {
  const name = Buffer.from('pad');
  const leb = (value: number): number[] => {
    const out: number[] = [];
    do {
      let byte = value & 0x7f;
      value >>>= 7;
      if (value !== 0) byte |= 0x80;
      out.push(byte);
    } while (value !== 0);
    return out;
  };
  // Section = id(0) + leb(size) + leb(name length) + name + payload; search the payload size.
  const content = (size: number): number => 1 + name.length + size;
  const total = (size: number): number => bytes.length + 1 + leb(content(size)).length + content(size);
  let payload = totalBytes - bytes.length - 16;
  while (total(payload) < totalBytes) payload += 1;
  assert.equal(total(payload), totalBytes, 'no custom section size reaches the exact total');
  const section = Buffer.concat([Buffer.from([0, ...leb(content(payload)), name.length]), name, Buffer.alloc(payload)]);
  return Buffer.concat([bytes, section]);
}

describe('compile size caps', () => {
  it('accepts an 8 MiB module over gRPC and refuses one byte more', async () => {
    const base = await assembleWat('constant', constantWat('{"big":true}'));
    const limit = 8 * 1024 * 1024;
    const largest = padModule(base, limit);
    assert.equal(largest.length, limit);
    const digest = await runner.client.compile(largest);
    const result = await runner.client.invoke(invocation(digest));
    assert.deepEqual(result.outcome, { kind: 'output', outputJson: '{"big":true}' });
    await rejectsWith(runner.client.compile(padModule(base, limit + 1)), (error) => assert.equal(error.code, 'module_too_large'));
  });
});

describe('invoke', () => {
  it('round-trips the envelope through a guest', async () => {
    const result = await runner.client.invoke(invocation(echo, { payloadJson: '{"amount": 12.50, "big": 12345678901234567890}', permissions: ['emit_event'] }));
    assert.equal(result.outcome.kind, 'output');
    assert.equal(result.replayed, false);
    assert.ok(result.fuelUsed > 0);
    if (result.outcome.kind !== 'output') return;
    // The payload text reaches the guest verbatim (no float or bigint rounding through JSON.parse).
    assert.match(result.outcome.outputJson, /^\{"payload":\{"amount": 12\.50, "big": 12345678901234567890\},/);
    assert.deepEqual(parseOutput(result.outcome.outputJson)['action'], { id: 'act_test', digest: echo });
    assert.deepEqual(Object.keys(parseOutput(result.outcome.outputJson)), ['payload', 'secrets', 'permissions', 'action']);
  });

  it('reports a rejected payload', async () => {
    const digest = await runner.client.compile(await assembleWat('reject', REJECT_WAT));
    const result = await runner.client.invoke(invocation(digest));
    assert.equal(result.outcome.kind, 'rejected');
  });

  it('answers NOT_FOUND for a digest never compiled here', async () => {
    await assert.rejects(runner.client.invoke(invocation('0'.repeat(64))), (error: unknown) => {
      assert.ok(error instanceof AccessError);
      assert.equal(error.status, 404);
      assert.equal(error.code, 'module_not_found');
      return true;
    });
  });

  it('validates every field with INVALID_ARGUMENT naming it', async () => {
    const cases: Array<[Parameters<typeof invocation>[1], string]> = [
      [{ payloadJson: '{"unterminated":' }, 'payload_json'],
      [{ payloadJson: JSON.stringify({ blob: 'x'.repeat(1024 * 1024) }) }, 'payload_json'],
      [{ permissions: Array.from({ length: 26 }, (_, i) => `perm_${i}`) }, 'permissions'],
      [{ permissions: ['read_secret:lower_case'] }, 'permissions[0]'],
      [{ permissions: ['has space'] }, 'permissions[0]'],
      [{ permissions: ['read_secret:A'], requiredSecretKeys: Array.from({ length: 3_000_000 }, () => 'A') }, 'required_secret_keys'],
      [{ idempotencyKey: 'no-separator' }, 'idempotency_key'],
      [{ idempotencyKey: 'run:' }, 'idempotency_key'],
      [{ fence: 0 }, 'fence'],
      [{ orgId: '' }, 'org_id'],
      [{ actionId: 'bad\u0000id' }, 'action_id'],
    ];
    for (const [overrides, field] of cases) {
      await rejectsWith(runner.client.invoke(invocation(echo, overrides)), (error) => assert.equal(error.field, field, error.message));
    }
    await rejectsWith(runner.client.invoke(invocation('ABC')), (error) => assert.equal(error.field, 'digest'));
  });
});

describe('health', () => {
  it('reports ok, the version and uptime', async () => {
    const health = await runner.client.health();
    assert.equal(health.ok, true);
    assert.match(health.version, /^\d+\.\d+\.\d+/);
    assert.ok(health.uptimeMs >= 0);
  });
});
