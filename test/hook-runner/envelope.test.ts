// What a guest is given: secrets only for declared `read_secret:` keys that exist (undeclared ones
// absent, not empty), the permissions, the action; `simulate` gets no secrets and records nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { invocation, parseOutput, startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';

let runner: RunnerFixture;
let echo: string;
const scope = { orgId: 'org_env', actionId: 'act_env' };

before(async () => {
  runner = await startRunner();
  echo = await runner.client.compile(await assembleWat('echo', ECHO_WAT));
  await runner.client.putSecret({ ...scope, key: 'API_KEY', value: 'sk_live_declared' });
  await runner.client.putSecret({ ...scope, key: 'WEBHOOK_SECRET', value: 'whsec_undeclared' });
  await runner.client.putSecret({ orgId: 'org_other', actionId: 'act_env', key: 'API_KEY', value: 'other_tenant_value' });
});
after(() => runner.close());

async function envelope(overrides: Parameters<typeof invocation>[1]): Promise<Record<string, unknown>> {
  const result = await runner.client.invoke(invocation(echo, { ...scope, ...overrides }));
  assert.equal(result.outcome.kind, 'output');
  return result.outcome.kind === 'output' ? parseOutput(result.outcome.outputJson) : {};
}

describe('guest envelope', () => {
  it('injects only declared secrets that exist, for this org and action', async () => {
    const permissions = ['read_secret:API_KEY', 'read_secret:NOT_STORED', 'emit_event'];
    const given = await envelope({ permissions, payloadJson: '{"order":1}' });
    assert.deepEqual(given, {
      payload: { order: 1 },
      secrets: { API_KEY: 'sk_live_declared' },
      permissions,
      action: { id: 'act_env', digest: echo },
    });
    assert.equal('WEBHOOK_SECRET' in (given['secrets'] as object), false);
    assert.equal('NOT_STORED' in (given['secrets'] as object), false);
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
