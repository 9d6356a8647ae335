// The runtime's guard for lmdb-js's failed commits (hook-runner/lmdb-commit-failure.ts says what
// lmdb-js does and why): a stray is logged and the process goes on; a failed write answers its
// caller (a 5xx, a stalled run), and the ledger settles its commit's own rejection (open-ledger.ts).

import { guardCommitFailures } from '../../hook-runner/lmdb-commit-failure.ts';
import type { Logger } from '../log.ts';

export { isLedgerCommitFailure } from '../../hook-runner/lmdb-commit-failure.ts';

/** Installs the guard for this process (call once, at startup). */
export function guardLedgerCommitFailures(logger: Logger): void {
  guardCommitFailures((error) => logger.error('ledger commit failed', { error: error.message, stack: error.stack }));
}
