// Ends the runner's memory of old calls. Completed invocations and run fences older than the
// retention are removed, oldest first, in bounded passes. A pruned key that is ever retried runs
// again, which is harmless: a guest run is a pure function of its input (no imports, DESIGN 6.5),
// and a run that moved past a fence is refused by the runtime's own fence check as well.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FenceTimeKey, InvocationRecord, InvocationTimeKey, RunnerStore } from './store.ts';

/** Far beyond any retry schedule (at most hours) and a support person's resume of a failed run. */
export const RECORD_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;
export const PRUNE_INTERVAL_MS = 60 * 60 * 1000;
/**
 * Records of each kind per transaction. Each invocation is read whole (its output up to 256 KiB) on
 * the runner's main thread: passes of 10,000 held it for 2.9 s, long enough for Invoke and Health
 * calls to time out (sluice_hook_runner_up read 0). 256 outputs of 256 KiB decode in ~60 ms.
 */
const PASS_LIMIT = 256;

export interface PrunedRecords {
  readonly invocations: number;
  readonly fences: number;
}

/**
 * Removes everything written before `nowMs - retentionMs`, in transactions of at most `passSize`
 * records of each kind, each durable before the next is read; resolves with what was removed, or
 * after the pass in progress once `stop` is aborted (the runner is closing: the next prune goes on).
 * A fence raised since its old entry was written stays.
 */
export async function pruneRunnerRecords(store: RunnerStore, nowMs: number, retentionMs = RECORD_RETENTION_MS, passSize = PASS_LIMIT, stop?: AbortSignal): Promise<PrunedRecords> {
  let invocations = 0;
  let fences = 0;
  for (;;) {
    const pass = await prunePass(store, nowMs - retentionMs, passSize);
    invocations += pass.invocations;
    fences += pass.fences;
    if (!pass.full || stop?.aborted === true) return { invocations, fences };
    // Calls go on between passes.
    await nextTurn();
  }
}

/** One bounded pass; `full` when either kind had `limit` old entries, so more may be left. */
async function prunePass(store: RunnerStore, cutoff: number, limit: number): Promise<PrunedRecords & { readonly full: boolean }> {
  const end: [number] = [cutoff];
  const invocationKeys = [...store.invocationsByTime.getKeys({ end, limit })] as InvocationTimeKey[];
  const fenceEntries = [...store.fencesByTime.getRange({ end, limit })] as Array<{ key: FenceTimeKey; value: string }>;
  const full = invocationKeys.length === limit || fenceEntries.length === limit;
  if (invocationKeys.length === 0 && fenceEntries.length === 0) return { invocations: 0, fences: 0, full };
  return store.durable(
    store.fences.transaction(() => {
      let invocations = 0;
      for (const key of invocationKeys) {
        const [at, orgId, idempotencyKey] = key;
        void store.invocationsByTime.remove(key);
        const record = store.invocations.get([orgId, idempotencyKey]) as InvocationRecord | undefined;
        if (record?.completedAtMs !== at) continue;
        void store.invocations.remove([orgId, idempotencyKey]);
        invocations += 1;
      }
      let fences = 0;
      for (const { key, value } of fenceEntries) {
        const [, orgId, runId] = key;
        void store.fencesByTime.remove(key);
        if (store.fences.get([orgId, runId]) !== value) continue;
        void store.fences.remove([orgId, runId]);
        fences += 1;
      }
      return { invocations, fences, full };
    }),
  );
}
