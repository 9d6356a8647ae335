// Every RPC needs `authorization: Bearer <runner token>`: without it, or with a wrong one, the runner
// answers UNAUTHENTICATED and does nothing; the runtime client maps that to a non-retryable 502.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client, credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { SluiceError } from '../../runtime/errors.ts';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { loadHookRunnerService, type HookRunnerMethodName } from '../../hook-runner/wire.ts';
import { newToken, startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat, REJECT_WAT } from '../helpers/hook-runner-wat.ts';

let runner: RunnerFixture;
let raw: Client;

before(async () => {
  runner = await startRunner();
  raw = new Client(runner.child.currentAddress ?? '', credentials.createInsecure());
});
after(async () => {
  raw.close();
  await runner.close();
});

function rawCall(method: HookRunnerMethodName, request: object, authorization?: string): Promise<ServiceError | null> {
  const definition = loadHookRunnerService()[method] as unknown as {
    path: string; requestSerialize: (value: object) => Buffer; responseDeserialize: (bytes: Buffer) => unknown;
  };
  const metadata = new Metadata();
  if (authorization !== undefined) metadata.set('authorization', authorization);
  return new Promise((resolve) => {
    raw.makeUnaryRequest(definition.path, definition.requestSerialize, definition.responseDeserialize, request, metadata, { deadline: Date.now() + 10_000 }, (error) => resolve(error));
  });
}

const REQUESTS: Record<HookRunnerMethodName, object> = {
  Compile: { wasm: Buffer.from('00', 'hex') },
  Invoke: { org_id: 'o', action_id: 'a', digest: '0'.repeat(64), permissions: [], payload_json: '{}', idempotency_key: 'r:s', fence: '1', simulate: false },
  PutSecret: { org_id: 'org_auth', action_id: 'a', key: 'INJECTED', value: 'x' },
  ListSecretKeys: { org_id: 'org_auth', action_id: 'a' },
  DeleteSecret: { org_id: 'org_auth', action_id: 'a', key: 'INJECTED' },
  Health: {},
  ForgetOrg: { org_id: 'org_auth' },
};

describe('runner token', () => {
  for (const [label, authorization] of [
    ['no metadata', undefined],
    ['a wrong token', `Bearer ${newToken()}`],
    ['the token without Bearer', 'TOKEN'],
    ['an empty bearer', 'Bearer '],
  ] as const) {
    it(`refuses every method with ${label}`, async () => {
      const header = authorization === 'TOKEN' ? runner.token : authorization;
      for (const [method, request] of Object.entries(REQUESTS) as Array<[HookRunnerMethodName, object]>) {
        const error = await rawCall(method, request, header);
        assert.equal(error?.code, status.UNAUTHENTICATED, `${method}: ${error?.details}`);
      }
    });
  }

  it('refuses a call without the token before reading its message: 11 MiB that no decoder could read is never decoded', async () => {
    const definition = loadHookRunnerService().Compile as unknown as { path: string };
    const metadata = new Metadata();
    metadata.set('authorization', `Bearer ${newToken()}`);
    const garbage = Buffer.alloc(11 * 1024 * 1024, 0xff);
    const error = await new Promise<ServiceError | null>((resolve) => {
      raw.makeUnaryRequest(definition.path, (bytes: Buffer) => bytes, (bytes: Buffer) => bytes, garbage, metadata, { deadline: Date.now() + 10_000 }, (failure) => resolve(failure));
    });
    assert.equal(error?.code, status.UNAUTHENTICATED, `a decoded message fails as a bad request instead: ${error?.details}`);
  });

  it('did nothing for refused calls', async () => {
    assert.deepEqual(await runner.client.listSecretKeys({ orgId: 'org_auth', actionId: 'a' }), []);
  });

  it('serves the right token', async () => {
    assert.equal(await rawCall('Health', {}, `Bearer ${runner.token}`), null);
  });

  it('maps UNAUTHENTICATED to a non-retryable hook_runner_unauthenticated error', async () => {
    const wrong = new HookRunnerClient(runner.child.currentAddress ?? '', newToken());
    try {
      await assert.rejects(wrong.compile(await assembleWat('reject', REJECT_WAT)), (error: unknown) => {
        assert.ok(error instanceof SluiceError);
        assert.equal(error.code, 'hook_runner_unauthenticated');
        assert.equal(error.status, 502);
        return true;
      });
    } finally {
      wrong.close();
    }
  });
});
