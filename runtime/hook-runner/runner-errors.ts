// Maps a failed hook-runner call (gRPC status + `sluice-code` trailer) to the Sluice error family,
// named by what the caller should do: retry, fix the input, treat as a conflict, or fail the step.
import { status, type ServiceError } from '@grpc/grpc-js';
import { AccessError, ConflictError, InputError, RetryableError, SluiceError, TerminalError } from '../errors.ts';
import { SLUICE_CODE_METADATA_KEY } from '../../hook-runner/wire.ts';

const trailer = (error: ServiceError, key: string): string | undefined => {
  const [value] = error.metadata?.get(key) ?? [];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
};

/**
 * The runner answered that its disk is below its floor (hook-runner/disk-floor.ts): it ran and wrote
 * nothing. An answer, not a lost connection, so the client does not try again at once; the step's
 * retry policy (or the API caller, after a 503) does.
 */
export const answeredDiskFull = (error: ServiceError): boolean => error.code === status.UNAVAILABLE && trailer(error, SLUICE_CODE_METADATA_KEY) === 'hook_runner_disk_full';

/**
 * Codes of the runner's UNAVAILABLE answers that asking again at once would not change: its store
 * could not write (a commit failed) or confirm on disk (a sync failed), or a module took past the
 * compile deadline to compile again (each attempt would spend up to that deadline again).
 */
const RETRY_LATER_ANSWERS = new Set(['hook_runner_write_failed', 'hook_runner_write_unconfirmed', 'module_recompile_timeout']);

/** The runner answered UNAVAILABLE for a reason that lasts (RETRY_LATER_ANSWERS): an answer, not retried at once. */
export const answeredRetryLater = (error: ServiceError): boolean => error.code === status.UNAVAILABLE && RETRY_LATER_ANSWERS.has(trailer(error, SLUICE_CODE_METADATA_KEY) ?? '');

/** The runner refused the runtime's runner token: a deployment fault, not the caller's. */
export const refusesToken = (error: ServiceError): boolean => error.code === status.UNAUTHENTICATED || error.code === status.PERMISSION_DENIED;

export const isServiceError = (error: unknown): error is ServiceError =>
  error instanceof Error && typeof (error as Partial<ServiceError>).code === 'number' && 'details' in error;

/**
 * The runner could not be reached (after the client's own retries): the step retries later.
 * `mayHaveRun`: whether a request may have got to the runner (a connection lost mid-call); false
 * when none did (no connection, no address), so the attempt never started.
 */
export class RunnerUnavailableError extends RetryableError {
  readonly mayHaveRun: boolean;
  constructor(message: string, mayHaveRun: boolean, cause?: unknown) {
    super('hook_runner_unavailable', message, undefined, cause === undefined ? {} : { cause });
    this.mayHaveRun = mayHaveRun;
  }
}

/**
 * A call that ran nothing: the runtime refused to send it (it would have run wrongly), or the runner
 * refused it before anything ran (its disk below its floor). The attempt never started; retried.
 */
export class CallNotSentError extends RetryableError {
  constructor(code: string, message: string, retryAfterMs?: number) {
    super(code, message, retryAfterMs);
  }
}

/**
 * The caller withdrew the call (its signal aborted: the run left the attempt). A call still waiting
 * for its guest's turn is dropped by the runner unrun; one whose guest had started runs to its end
 * and is recorded (a retry of its key replays it). `mayHaveRun`: whether the call had been sent.
 */
export class CallWithdrawnError extends SluiceError {
  readonly mayHaveRun: boolean;
  constructor(method: string, mayHaveRun: boolean) {
    super(409, 'call_withdrawn', mayHaveRun ? `Withdrawn while the hook-runner had the call (${method}): its run left this attempt. A guest that had not started was not run.` : `Not sent (${method}): its run left this attempt before the call went out.`);
    this.mayHaveRun = mayHaveRun;
  }
}

/** What a caller is told when a commit of the hook-runner's store failed. */
export const RUNNER_WRITE_FAILED = "The hook-runner could not store this durably (its disk is full or failing): nothing of it was kept. Try again later.";

/** What a caller is told when the hook-runner's store took a write its disk could not confirm (its sync failed). */
export const RUNNER_WRITE_UNCONFIRMED = "The hook-runner stored this, but its disk could not confirm it (an I/O error): it may or may not have been kept. Try again later.";

/** What a caller is told when the hook-runner's disk is below its floor. */
export const RUNNER_DISK_FULL = "The hook-runner's disk is nearly full: nothing was run or stored. Try again later.";

export const unavailable = (message: string, cause?: unknown, mayHaveRun = false): RunnerUnavailableError => new RunnerUnavailableError(message, mayHaveRun, cause);

/**
 * Whether a failed call never left this process: grpc-js fails a call that no connection could take
 * (its picker) with UNAVAILABLE "No connection established"; any other UNAVAILABLE may have been sent.
 */
export const neverSent = (error: ServiceError): boolean => error.code === status.UNAVAILABLE && error.details.startsWith('No connection established');

/**
 * Whether a call's deadline passed before any connection took it: grpc-js then says it was
 * "Waiting for LB pick" (a connection still opening, e.g. a TLS handshake the far end never
 * answers). Nothing was sent; a call sent to a runner that then went quiet names its pick's time.
 */
export const timedOutUnsent = (error: ServiceError): boolean => error.code === status.DEADLINE_EXCEEDED && error.details.includes('Waiting for LB pick');

/**
 * The Sluice error for a failed call. Messages are the runner's own, which never contain secret
 * values; `method` names the RPC for the operator.
 */
export function toSluiceError(method: string, error: ServiceError): SluiceError {
  const code = trailer(error, SLUICE_CODE_METADATA_KEY);
  const field = trailer(error, 'sluice-field');
  const details = error.details.length > 0 ? error.details : `hook-runner ${method} failed (${status[error.code] ?? error.code}).`;
  const options = { cause: error, ...(field === undefined ? {} : { field }) };
  switch (error.code) {
    case status.INVALID_ARGUMENT:
      return new InputError(400, code ?? 'invalid_request', details, options);
    case status.RESOURCE_EXHAUSTED:
      return new InputError(413, code ?? 'too_large', details, options);
    case status.NOT_FOUND:
      return new AccessError(404, code ?? 'not_found', details, options);
    case status.FAILED_PRECONDITION:
      if (code === 'stale_fence' || (code === undefined && details.includes('stale fence'))) {
        return new ConflictError('stale_fence', details, {}, options);
      }
      if (code === 'idempotency_key_reused' || code === 'secret_limit_reached') return new ConflictError(code, details, {}, options);
      // The runner's master key is not the one the secret was sealed under (or its bytes are
      // damaged): the operator's to fix, and refused before the guest ran, so retried as a call never sent.
      if (code === 'secret_unreadable') {
        return new CallNotSentError(code, `${details} Nothing was run: start the hook-runner with the master key the secret was sealed under (SLUICE_PREVIOUS_MASTER_KEYS during a rotation), or set the secret again; the step is retried, and a run out of retries can be resumed.`);
      }
      return new TerminalError(code ?? 'failed_precondition', details, options);
    case status.UNAUTHENTICATED:
    case status.PERMISSION_DENIED:
      // A deployment fault (wrong runner token), not the API caller's: a 502, not retried.
      return new SluiceError(502, 'hook_runner_unauthenticated', 'The hook-runner refused the runner token.', options);
    case status.DATA_LOSS:
      return new TerminalError(code ?? 'hook_runner_data_loss', details, options);
    case status.INTERNAL:
      if (code === 'module_recompile_failed') return new TerminalError(code, details, options);
      return new RetryableError(code ?? 'hook_runner_internal', details, undefined, options);
    case status.UNAVAILABLE:
      // Nothing ran or was written; an API caller is told to come back in 5 s, as for the runtime's own floor.
      // Said the same way to everyone: the runner's answer names its disk's free space and floor,
      // which are the operator's to know (sluice_hook_runner_disk_low tells them), not a tenant's.
      if (code === 'hook_runner_disk_full') return new CallNotSentError(code, RUNNER_DISK_FULL, 5000);
      // As the runtime's own failed commits: 503 write_failed, Retry-After 5 (an Invoke's guest may have run; it is pure).
      if (code === 'hook_runner_write_failed') return new RetryableError('write_failed', RUNNER_WRITE_FAILED, 5000, options);
      // As the runtime's own unconfirmed flushes: 503 write_unconfirmed, Retry-After 5.
      if (code === 'hook_runner_write_unconfirmed') return new RetryableError('write_unconfirmed', RUNNER_WRITE_UNCONFIRMED, 5000, options);
      return new RetryableError(code ?? 'hook_runner_unavailable', details, undefined, options);
    case status.DEADLINE_EXCEEDED:
      return new RetryableError('hook_runner_timeout', `hook-runner ${method} did not answer before its deadline.`, undefined, options);
    default:
      return new RetryableError(code ?? 'hook_runner_error', details, undefined, options);
  }
}
