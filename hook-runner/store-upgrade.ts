// Upgrades a runner store from an earlier layout (store-format.ts) before anything else reads it:
// from layout 1, the pruning index entries that stores written before record pruning lack.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FenceKey, InvocationKey, InvocationRecord, RunnerStore } from './store.ts';
import { stampIn } from './store-format.ts';

/** Records written per transaction: calls wait for none (the runner listens only after its start). */
const CHUNK = 1_000;

/**
 * Brings a store of layout 1 to 2: every invocation record gets its invocations-by-time entry (at its
 * completedAtMs; a record without one is dated `nowMs`, so it is pruned a retention from now) and
 * every fence without a fences-by-time entry gets one dated `nowMs`. Idempotent: an upgrade cut
 * short is done again at the next start (the stamp is written after it).
 */
export async function upgradeRunnerStore(store: RunnerStore, nowMs: number): Promise<void> {
  if (stampIn(store.dataFormat) >= 2) return;
  let writes: Array<() => void> = [];
  const flush = async (): Promise<void> => {
    const batch = writes;
    writes = [];
    if (batch.length > 0) await store.durable(store.fences.transaction(() => batch.forEach((write) => write())));
    await nextTurn();
  };
  for (const { key, value } of store.invocations.getRange({})) {
    const [orgId, idempotencyKey] = key as InvocationKey;
    const record = value as InvocationRecord;
    const at = typeof record.completedAtMs === 'number' ? record.completedAtMs : nowMs;
    writes.push(() => {
      if (at !== record.completedAtMs) void store.invocations.put(key as InvocationKey, { ...record, completedAtMs: at });
      void store.invocationsByTime.put([at, orgId, idempotencyKey], null);
    });
    if (writes.length === CHUNK) await flush();
  }
  await flush();
  const indexed = new Set<string>();
  for (const [, orgId, runId] of store.fencesByTime.getKeys({}) as Iterable<[number, string, string]>) indexed.add(`${orgId}\u0000${runId}`);
  for (const { key, value } of store.fences.getRange({})) {
    const [orgId, runId] = key as FenceKey;
    if (indexed.has(`${orgId}\u0000${runId}`)) continue;
    writes.push(() => void store.fencesByTime.put([nowMs, orgId, runId], value as string));
    if (writes.length === CHUNK) await flush();
  }
  await flush();
}
