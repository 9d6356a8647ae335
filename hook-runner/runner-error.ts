// Typed failures of the hook-runner: each carries the gRPC status it answers with and the stable
// snake_case Sluice code sent as `sluice-code` trailing metadata. Messages never contain secret values.
import { Metadata, status, type ServerErrorResponse } from '@grpc/grpc-js';
import { SandboxUnavailableError } from './sandbox.ts';
import { SLUICE_CODE_METADATA_KEY } from './wire.ts';
import { isLedgerCommitFailure, tookUnsynced, UnconfirmedFlushError } from './lmdb-commit-failure.ts';

export class RunnerError extends Error {
  readonly grpcStatus: status;
  readonly code: string;

  constructor(grpcStatus: status, code: string, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.grpcStatus = grpcStatus;
    this.code = code;
  }
}

/** The runner's disk is below its free-space floor (disk-floor.ts): nothing was run or written; callers retry. */
export class DiskFullError extends RunnerError {
  constructor(message: string) {
    super(status.UNAVAILABLE, 'hook_runner_disk_full', message);
  }
}

/** The request is malformed; `field` names the offending proto field. */
export class InvalidRequestError extends RunnerError {
  readonly field: string | undefined;
  constructor(code: string, message: string, field?: string) {
    super(status.INVALID_ARGUMENT, code, message);
    this.field = field;
  }
}

export class ModuleNotFoundError extends RunnerError {
  constructor(digest: string) {
    super(status.NOT_FOUND, 'module_not_found', `No module with digest ${digest} was compiled on this runner.`);
  }
}

/** Every caller of an upload compile gave up before it started (cancelled or past its deadline): nothing was compiled. */
export class CompileAbandonedError extends RunnerError {
  constructor() {
    super(status.CANCELLED, 'compile_abandoned', 'The compile was dropped before it started: its caller gave up (cancelled or past its deadline).');
  }
}

/** Every caller of an Invoke gave up before the guest's turn came (cancelled or past its deadline): nothing ran. */
export class InvokeAbandonedError extends RunnerError {
  constructor() {
    super(status.CANCELLED, 'invoke_abandoned', 'The call was dropped before its guest ran: its caller gave up (cancelled or past its deadline).');
  }
}

/** A fence lower than the highest one seen for the run: a newer attempt owns the step. */
export class StaleFenceError extends RunnerError {
  constructor(fence: bigint, highest: bigint) {
    super(status.FAILED_PRECONDITION, 'stale_fence', `stale fence: ${fence} is lower than ${highest}, the highest fence seen for this run.`);
  }
}

/** The caller expects secrets this runner's vault does not hold (its data is new or was wiped): nothing ran. */
export class SecretsMissingError extends RunnerError {
  constructor(keys: readonly string[]) {
    super(status.FAILED_PRECONDITION, 'secrets_missing_on_runner', `This runner does not hold secrets the call requires: ${keys.join(', ')} (its data is new or was wiped); nothing was run.`);
  }
}

/** The org was forgotten (it was deleted: forgotten-orgs.ts): nothing of it runs or is stored any more. */
export class OrganizationForgottenError extends RunnerError {
  constructor() {
    super(status.FAILED_PRECONDITION, 'organization_forgotten', 'This organization was deleted: the hook-runner runs and stores nothing for it any more.');
  }
}

/** Fail-closed vault read: the ciphertext does not authenticate under the master key. */
export class SecretUnreadableError extends RunnerError {
  constructor(key: string) {
    super(status.FAILED_PRECONDITION, 'secret_unreadable', `secret could not be decrypted: ${key} (tampered data or a different master key).`);
  }
}

/** The action already holds the most secrets it may: a new one waits for one to be deleted. */
export class SecretLimitError extends RunnerError {
  constructor(limit: number) {
    super(status.FAILED_PRECONDITION, 'secret_limit_reached', `An action may hold at most ${limit} secrets; delete one first.`);
  }
}

/** The idempotency key is known for another action of the org: the caller reused a key. */
export class IdempotencyKeyReusedError extends RunnerError {
  constructor() {
    super(status.FAILED_PRECONDITION, 'idempotency_key_reused', 'The idempotency key was already used for a different action.');
  }
}

export const unauthenticated = (): RunnerError =>
  new RunnerError(status.UNAUTHENTICATED, 'unauthenticated', 'A valid runner token is required (authorization: Bearer <token>).');

/**
 * The gRPC answer for any thrown value. A sandbox that cannot run (addon missing or broken) is
 * UNAVAILABLE, so callers retry rather than fail runs. Unexpected errors become INTERNAL with a generic message so
 * that nothing from their text (which could hold a secret) reaches the caller.
 */
export function toServerError(error: unknown): ServerErrorResponse {
  const known = error instanceof RunnerError
    ? error
    : error instanceof SandboxUnavailableError
      ? new RunnerError(status.UNAVAILABLE, error.code, 'The WebAssembly sandbox is unavailable on this runner; see its log.')
      : error instanceof UnconfirmedFlushError || tookUnsynced(error)
        ? new RunnerError(status.UNAVAILABLE, 'hook_runner_write_unconfirmed', 'The hook-runner stored this, but its disk could not confirm it (an I/O error): it may not outlive a crash. Try again later.')
        : isLedgerCommitFailure(error)
          ? new RunnerError(status.UNAVAILABLE, 'hook_runner_write_failed', 'The hook-runner could not store this durably (a commit failed: its disk is full or failing); nothing of it was kept. Try again later.')
          : new RunnerError(status.INTERNAL, 'hook_runner_internal', 'The hook-runner failed unexpectedly; see its log.');
  const metadata = new Metadata();
  metadata.set(SLUICE_CODE_METADATA_KEY, known.code);
  if (known instanceof InvalidRequestError && known.field !== undefined) metadata.set('sluice-field', known.field);
  return Object.assign(new Error(known.message), { code: known.grpcStatus, details: known.message, metadata });
}

/** The runner cannot start as configured (bad master key, unsafe key file, bad flag); the message says how to fix it. */
export class RunnerConfigError extends Error {
  override readonly name = 'RunnerConfigError';
}
