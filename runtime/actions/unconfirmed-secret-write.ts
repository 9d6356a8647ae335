// A secret change the hook-runner did not confirm: its answer did not come before the deadline, or
// the connection was lost with the call out. The runner may still make it (a frozen runner reads the
// call late, and its gRPC deadline counts from then), so the API says it may or may not have been
// made and to send it again, which is safe: a PUT sets the same value, and a DELETE of a secret
// already gone answers 204 while Sluice still names it (custom-actions-api.ts).

import { RetryableError } from '../errors.ts';
import { RunnerUnavailableError } from '../hook-runner/runner-errors.ts';

/** How soon the API tells the caller to send an unconfirmed change again. */
const SEND_AGAIN_AFTER_MS = 1000;

/** `error` as the API answers it: an unconfirmed change is said so, with Retry-After; others as they are. */
export function unconfirmedSecretWrite(error: unknown): unknown {
  if (!(error instanceof RetryableError)) return error;
  const unconfirmed = error instanceof RunnerUnavailableError ? error.mayHaveRun : error.code === 'hook_runner_timeout';
  if (!unconfirmed) return error;
  return new RetryableError(error.code, `${error.message} The change may or may not have been made: send the same request again (it is safe to repeat).`, SEND_AGAIN_AFTER_MS, { cause: error });
}
