// The error code a failed request is answered with (server.ts), for counting outcomes by it.

import { SluiceError } from '../errors.ts';
import { failedWriteError } from '../ledger/commit-failure-guard.ts';

/** A Sluice error's own code; the ledger's for a write it could not complete (`write_failed` for a full disk); else `internal_error`. */
export function errorCodeOf(error: unknown): string {
  if (error instanceof SluiceError) return error.code;
  return failedWriteError('request', error)?.code ?? 'internal_error';
}
