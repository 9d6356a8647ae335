// A runner store write that took but whose sync failed (UnconfirmedFlushError: an I/O error on
// fsync) reaches the runtime as its own unconfirmed writes do, a retryable 503 write_unconfirmed
// with Retry-After 5, not as an unexpected hook_runner_internal. A real fsync cannot be made to fail
// here, so the runner's answer is built from the error and read back as the runtime's client does.

import assert from 'node:assert/strict';
import { status, type ServiceError } from '@grpc/grpc-js';
import { test } from 'node:test';
import { UnconfirmedFlushError } from '../../hook-runner/lmdb-commit-failure.ts';
import { toServerError } from '../../hook-runner/runner-error.ts';
import { SLUICE_CODE_METADATA_KEY } from '../../hook-runner/wire.ts';
import { retryAfterHeader, RetryableError } from '../../runtime/errors.ts';
import { toSluiceError } from '../../runtime/hook-runner/runner-errors.ts';

test('an unconfirmed store write is UNAVAILABLE hook_runner_write_unconfirmed at the runner and 503 write_unconfirmed, Retry-After 5, at the runtime', () => {
  const answer = toServerError(new UnconfirmedFlushError(new Error('Input/output error')));
  assert.equal(answer.code, status.UNAVAILABLE);
  assert.deepEqual(answer.metadata?.get(SLUICE_CODE_METADATA_KEY), ['hook_runner_write_unconfirmed']);
  assert.doesNotMatch(String(answer.details), /Input\/output error/, 'the disk\'s error is the operator\'s, logged by the runner');
  const seen = toSluiceError('Invoke', answer as ServiceError);
  assert.ok(seen instanceof RetryableError);
  assert.deepEqual([seen.status, seen.code, retryAfterHeader(seen)], [503, 'write_unconfirmed', '5']);
  assert.match(seen.message, /may or may not have been kept/);
});
