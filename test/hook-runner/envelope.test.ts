// What a guest is given: secrets only for declared `read_secret:` keys that exist (undeclared ones
// absent, not empty), the permissions, the action; `simulate` gets no secrets and records nothing.
// A hex-encoding echo shows the secrets as given; a plain echo shows them masked in the output.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { invocation, parseOutput, startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat, ECHO_WAT, fromHexEcho, HEX_ECHO_WAT } from '../helpers/hook-runner-wat.ts';

let runner: RunnerFixture;
let echo: string;
let hexEcho: string;
const scope = { orgId: 'org_env', actionId: 'act_env' };

before(async () => {
  runner = await startRunner();
  echo = await runner.client.compile(await assembleWat('echo', ECHO_WAT));
  hexEcho = await runner.client.compile(await assembleWat('hex-echo', HEX_ECHO_WAT));
  await runner.client.putSecret({ ...scope, key: 'API_KEY', value: 'sk_live_declared' });
  await runner.client.putSecret({ ...scope, key: 'WEBHOOK_SECRET', value: 'whsec_undeclared' });
  await runner.client.putSecret({ orgId: 'org_other', actionId: 'act_env', key: 'API_KEY', value: 'other_tenant_value' });
});
after(() => runner.close());

/** What the guest was given, read through the hex-encoding echo (its output holds no secret as written). */
async function envelope(overrides: Parameters<typeof invocation>[1]): Promise<Record<string, unknown>> {
  const result = await runner.client.invoke(invocation(hexEcho, { ...scope, ...overrides }));
  assert.equal(result.outcome.kind, 'output');
  return result.outcome.kind === 'output' ? fromHexEcho(result.outcome.outputJson) : {};
}

describe('guest envelope', () => {
  it('injects only declared secrets that exist, for this org and action', async () => {
    const permissions = ['read_secret:API_KEY', 'read_secret:NOT_STORED', 'emit_event'];
    const given = await envelope({ permissions, payloadJson: '{"order":1}' });
    assert.deepEqual(given, {
      payload: { order: 1 },
      secrets: { API_KEY: 'sk_live_declared' },
      permissions,
      action: { id: 'act_env', digest: hexEcho },
    });
    assert.equal('WEBHOOK_SECRET' in (given['secrets'] as object), false);
    assert.equal('NOT_STORED' in (given['secrets'] as object), false);
  });

  it("masks the given secrets' values in its output (8 characters or more), whether written raw or JSON-escaped", async () => {
    const masked = { orgId: 'org_env', actionId: 'act_mask' };
    await runner.client.putSecret({ ...masked, key: 'API_KEY', value: 'sk_live_declared' });
    await runner.client.putSecret({ ...masked, key: 'QUOTED', value: 'pa"ss\\word-9' });
    await runner.client.putSecret({ ...masked, key: 'SHORT', value: '50' });
    const permissions = ['read_secret:API_KEY', 'read_secret:QUOTED', 'read_secret:SHORT'];
    const payloadJson = '{"note":"the key is sk_live_declared","other":"other_tenant_value"}';
    const result = await runner.client.invoke(invocation(echo, { ...masked, permissions, payloadJson }));
    assert.equal(result.outcome.kind, 'output');
    const output = result.outcome.kind === 'output' ? result.outcome.outputJson : '';
    assert.deepEqual(parseOutput(output)['secrets'], { API_KEY: '[redacted]', QUOTED: '[redacted]', SHORT: '50' });
    assert.deepEqual(parseOutput(output)['payload'], { note: 'the key is [redacted]', other: 'other_tenant_value' }, 'wherever it appears; values it was not given stay');
    assert.doesNotMatch(output, /sk_live_declared|ss\\\\word/);
  });

  it('gives no secrets at all without read_secret permissions', async () => {
    assert.deepEqual((await envelope({ permissions: ['emit_event'] }))['secrets'], {});
  });

  it('reflects deletes and replacements on the next execution', async () => {
    await runner.client.putSecret({ ...scope, key: 'ROTATING', value: 'v1' });
    assert.deepEqual((await envelope({ permissions: ['read_secret:ROTATING'] }))['secrets'], { ROTATING: 'v1' });
    await runner.client.putSecret({ ...scope, key: 'ROTATING', value: 'v2' });
    assert.deepEqual((await envelope({ permissions: ['read_secret:ROTATING'] }))['secrets'], { ROTATING: 'v2' });
    assert.equal(await runner.client.deleteSecret({ ...scope, key: 'ROTATING' }), true);
    assert.equal(await runner.client.deleteSecret({ ...scope, key: 'ROTATING' }), false);
    assert.deepEqual((await envelope({ permissions: ['read_secret:ROTATING'] }))['secrets'], {});
  });

  it('lists key names only, per org and action', async () => {
    assert.deepEqual(await runner.client.listSecretKeys(scope), ['API_KEY', 'WEBHOOK_SECRET']);
    assert.deepEqual(await runner.client.listSecretKeys({ orgId: 'org_other', actionId: 'act_env' }), ['API_KEY']);
    assert.deepEqual(await runner.client.listSecretKeys({ orgId: 'org_env', actionId: 'act_e' }), []);
  });
});

describe('simulate', () => {
  it('injects no secrets even when declared', async () => {
    const given = await envelope({ permissions: ['read_secret:API_KEY'], simulate: true, idempotencyKey: '' });
    assert.deepEqual(given['secrets'], {});
    assert.deepEqual(given['permissions'], ['read_secret:API_KEY']);
  });

  it('records no fence and no result', async () => {
    const key = 'run_sim:step_1';
    const simulated = await runner.client.invoke(invocation(echo, { ...scope, idempotencyKey: key, fence: 99, payloadJson: '{"sim":true}', simulate: true }));
    assert.equal(simulated.replayed, false);
    // A real invocation of the same key at a lower fence runs (no fence 99 stored) and is not a replay.
    const real = await runner.client.invoke(invocation(echo, { ...scope, idempotencyKey: key, fence: 1, payloadJson: '{"sim":false}' }));
    assert.equal(real.replayed, false);
    assert.equal(real.outcome.kind === 'output' && JSON.parse(real.outcome.outputJson).payload.sim, false);
    // And simulating a completed key executes again rather than replaying.
    const again = await runner.client.invoke(invocation(echo, { ...scope, idempotencyKey: key, payloadJson: '{"sim":"again"}', simulate: true }));
    assert.equal(again.replayed, false);
    assert.equal(again.outcome.kind === 'output' && JSON.parse(again.outcome.outputJson).payload.sim, 'again');
  });
});
