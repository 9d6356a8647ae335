// A custom_action attempt that no connection could take never started (no started_at, as a refused
// webhook), while one whose connection was lost mid-call may have run and says so; both are
// retryable hook_runner_unavailable with the version they would run as evidence. Neither pins that
// version for the run's retries: only an answered attempt ran a version.

import assert from 'node:assert/strict';
import { createServer as createHttp2Server } from 'node:http2';
import { createServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { Metadata, status } from '@grpc/grpc-js';
import type { RunContext } from '../../actors/run-types.ts';
import { SLUICE_CODE_METADATA_KEY } from '../../hook-runner/wire.ts';
import { HookRunnerClient, unreachableReason } from '../../runtime/hook-runner/client.ts';
import { pinnedActionVersion, runCustomAction, type ActionResolver, type ActionStepOutcome } from '../../runtime/runs/custom-action-step.ts';

const approved: ActionResolver = {
  resolveForRun: () => ({ kind: 'approved', version: 3, digest: 'a'.repeat(64), permissions: [] }),
  resolveVersion: () => ({ kind: 'approved', version: 3, digest: 'a'.repeat(64), permissions: [] }),
};

const input = {
  orgId: 'acct-unreached',
  actionId: 'score',
  pinnedVersion: undefined,
  payloadJson: '{}',
  eventDepth: 0,
  takeDerived: () => true,
  idempotencyKey: 'run_1:score',
  fence: 1,
};

const clientFor = (port: number): HookRunnerClient => new HookRunnerClient(`127.0.0.1:${port}`, 'token-'.padEnd(32, 'x'), { attempts: 2, retryDelayMs: () => 1 });

/** The version a run whose only attempt ended in `outcome` keeps for its retries (the fields pinnedActionVersion reads). */
const pinnedAfter = (outcome: ActionStepOutcome): number | undefined =>
  pinnedActionVersion({ steps: [{ attempts: [{ claimedAt: 1, evidence: outcome.evidence }] }] } as unknown as RunContext, 'score');

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((closed) => server.close(() => closed()));
  return port;
}

test('no runner listening: the attempt fails hook_runner_unavailable, retryable, and was never invoked', async () => {
  const port = await closedPort();
  const client = clientFor(port);
  try {
    const outcome = await runCustomAction(input, approved, client);
    assert.equal(outcome.ok, false);
    assert.deepEqual(!outcome.ok && { code: outcome.error.code, retryable: outcome.error.retryable }, { code: 'hook_runner_unavailable', retryable: true });
    // The tenant reads this message: it says what happened, not where the runner is.
    assert.match(!outcome.ok ? outcome.error.message : '', /unavailable after 2 attempts \(Invoke\): no connection to it could be made/);
    assert.doesNotMatch(!outcome.ok ? outcome.error.message : '', new RegExp(`127\\.0\\.0\\.1|${port}|ECONNREFUSED`));
    assert.equal(outcome.invoked, false, 'no connection took the call: it never started');
    assert.deepEqual(outcome.evidence, { action_id: 'score', version: 3, digest: 'a'.repeat(64), idempotency_key: input.idempotencyKey });
    // Version 3 never ran: a version approved before the retry is the one the retry runs.
    assert.equal(pinnedAfter(outcome), undefined);
  } finally {
    client.close();
  }
});

test('a connection lost after the call was sent: the attempt may have run, so it counts as invoked', async () => {
  // An HTTP/2 server that takes each call's stream and then drops the whole connection.
  const server = createHttp2Server();
  server.on('stream', (stream) => stream.session?.destroy());
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const client = clientFor((server.address() as AddressInfo).port);
  try {
    const outcome = await runCustomAction(input, approved, client);
    assert.deepEqual(!outcome.ok && { code: outcome.error.code, retryable: outcome.error.retryable }, { code: 'hook_runner_unavailable', retryable: true });
    assert.equal(outcome.invoked, true);
    // No answer came: whether it ran is unknown, and the runner runs a key again under another digest.
    assert.equal(pinnedAfter(outcome), undefined);
  } finally {
    client.close();
    await new Promise<void>((closed) => server.close(() => closed()));
  }
});

test('an answered attempt pins its version for the run\'s retries and later steps', () => {
  const answered: ActionStepOutcome = { ok: false, error: { code: 'action_trap_unreachable', message: 'trapped', retryable: false }, evidence: { action_id: 'score', version: 3, digest: 'a'.repeat(64), fuel_used: 10, replayed: false }, invoked: true };
  assert.equal(pinnedAfter(answered), 3);
});

test('the runner\'s own UNAVAILABLE answer (a sandbox that cannot run) keeps its words; grpc-js\'s transport text does not reach the tenant', () => {
  const own = new Metadata();
  own.set(SLUICE_CODE_METADATA_KEY, 'sandbox_unavailable');
  const answered = Object.assign(new Error('14 UNAVAILABLE'), { code: status.UNAVAILABLE, details: 'The WebAssembly sandbox is unavailable on this runner; see its log.', metadata: own });
  assert.equal(unreachableReason(answered), 'The WebAssembly sandbox is unavailable on this runner; see its log.');
  const transport = Object.assign(new Error('14 UNAVAILABLE'), { code: status.UNAVAILABLE, details: 'Connection dropped: read ECONNRESET 10.0.3.7:7878', metadata: new Metadata() });
  assert.equal(unreachableReason(transport), 'the connection to it failed during the call');
  assert.equal(unreachableReason(new Error('the hook-runner child is restarting')), 'the hook-runner child is restarting');
});
