// The error code a failed request is answered with (server.ts), for counting outcomes by it.

import { SluiceError } from '../errors.ts';
import { isFailedWrite } from '../ledger/commit-failure-guard.ts';

/** A Sluice error's own code; `write_failed` for a write that kept nothing (a full disk); else `internal_error`. */
export function errorCodeOf(error: unknown): string {
  if (error instanceof SluiceError) return error.code;
  return isFailedWrite(error) ? 'write_failed' : 'internal_error';
}
