// The error code a failed request is answered with (server.ts), for counting outcomes by it.

import { isLedgerCommitFailure } from '../../hook-runner/lmdb-commit-failure.ts';
import { SluiceError } from '../errors.ts';

/** A Sluice error's own code; `write_failed` for a commit that failed (a full disk); else `internal_error`. */
export function errorCodeOf(error: unknown): string {
  if (error instanceof SluiceError) return error.code;
  return isLedgerCommitFailure(error) ? 'write_failed' : 'internal_error';
}
