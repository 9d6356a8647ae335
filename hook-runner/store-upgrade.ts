// Upgrades a runner store from an earlier layout (store-format.ts) before anything else reads it:
// from layout 1, the pruning index entries that stores written before record pruning lack; from
// layout 2, an unknown user for every module stored before uploads named theirs.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FenceKey, InvocationKey, InvocationRecord, RunnerStore } from './store.ts';
import { stampIn } from './store-format.ts';

/** Records written per transaction: calls wait for none (the runner listens only after its start). */
const CHUNK = 1_000;

/** Brings a store of an earlier layout to this release's; each step is idempotent (the stamp is written after them all). */
export async function upgradeRunnerStore(store: RunnerStore, nowMs: number): Promise<void> {
  const from = stampIn(store.dataFormat);
  if (from < 2) await addPruningIndexes(store, nowMs);
  if (from < 3) await addUnknownModuleUsers(store);
}

/** Runs each queued write, CHUNK at a time, in one durable transaction per chunk. */
function chunkedWrites(store: RunnerStore): { add(write: () => void): Promise<void>; flush(): Promise<void> } {
  let writes: Array<() => void> = [];
  const flush = async (): Promise<void> => {
    const batch = writes;
    writes = [];
    if (batch.length > 0) await store.durable(store.fences.transaction(() => batch.forEach((write) => write())));
    await nextTurn();
  };
  return {
    async add(write) {
      writes.push(write);
      if (writes.length === CHUNK) await flush();
    },
    flush,
  };
}

/**
 * Layout 2 to 3: every stored module gets the user '' (module-users), so that forgetting an org
 * never removes a module an org uploaded before users were recorded.
 */
async function addUnknownModuleUsers(store: RunnerStore): Promise<void> {
  const writes = chunkedWrites(store);
  for (const digest of store.modules.getKeys({}) as Iterable<string>) await writes.add(() => void store.moduleUsers.put([digest, ''], null));
  await writes.flush();
}

/**
 * Layout 1 to 2: every invocation record gets its invocations-by-time entry (at its
 * completedAtMs; a record without one is dated `nowMs`, so it is pruned a retention from now) and
 * every fence without a fences-by-time entry gets one dated `nowMs`. Idempotent: an upgrade cut
 * short is done again at the next start (the stamp is written after it).
 */
async function addPruningIndexes(store: RunnerStore, nowMs: number): Promise<void> {
  const writes = chunkedWrites(store);
  for (const { key, value } of store.invocations.getRange({})) {
    const [orgId, idempotencyKey] = key as InvocationKey;
    const record = value as InvocationRecord;
    const at = typeof record.completedAtMs === 'number' ? record.completedAtMs : nowMs;
    await writes.add(() => {
      if (at !== record.completedAtMs) void store.invocations.put(key as InvocationKey, { ...record, completedAtMs: at });
      void store.invocationsByTime.put([at, orgId, idempotencyKey], null);
    });
  }
  await writes.flush();
  const indexed = new Set<string>();
  for (const [, orgId, runId] of store.fencesByTime.getKeys({}) as Iterable<[number, string, string]>) indexed.add(`${orgId}\u0000${runId}`);
  for (const { key, value } of store.fences.getRange({})) {
    const [orgId, runId] = key as FenceKey;
    if (indexed.has(`${orgId}\u0000${runId}`)) continue;
    await writes.add(() => void store.fencesByTime.put([nowMs, orgId, runId], value as string));
  }
  await writes.flush();
}
