// An organization's deletion with its mark's write held before it is issued: the org is fenced off
// (its writes refused) and not yet marked, the window tests of a failed or slow mark need. And the
// wait that tells when the writes already queued on the ledger have run.

import type { LedgerRoot } from '../../runtime/ledger/ledger.ts';
import { call, type CallResult } from './http.ts';
import { gateNextCall } from './method-gate.ts';
import { ADMIN_TOKEN, type TestRuntime } from './runtime.ts';

export interface HeldDeletion {
  /** The DELETE's answer: 202 once the mark went through, 500 when it failed. */
  readonly answer: Promise<CallResult>;
  /** Lets the mark's write go: it fails (MDB_DISKFULL) unless the deletion was held with `fails` false. */
  readonly release: () => void;
  /** For `finally`: lets a held mark go. */
  readonly done: () => void;
}

/** Sends `DELETE /organizations/:orgId` and resolves once its mark is held (the org fenced off). */
export async function deletionHeld(rt: TestRuntime, orgId: string, fails = true): Promise<HeldDeletion> {
  const mark = gateNextCall(rt.runtime.ledger.root, 'transaction', fails ? new Error('MDB_DISKFULL: simulated') : undefined);
  const answer = call(rt.url, 'DELETE', `/organizations/${orgId}`, { token: ADMIN_TOKEN });
  await mark.reachedBefore(answer, 'the deletion');
  return { answer, release: mark.release, done: mark.done };
}

/**
 * Resolves once the writes queued on `root` before this call have run, and what they set off at
 * once: transactions run in turn, so one queued after them is over only after them.
 */
export async function queuedWritesRun(root: LedgerRoot): Promise<void> {
  await root.transaction(() => true);
  await new Promise((resolve) => setImmediate(resolve));
}
