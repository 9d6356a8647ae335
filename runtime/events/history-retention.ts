// The end of history: events older than the retention go, with their recordings and their runs,
// oldest first, in bounded transactions (hourly, beside the dedup-claim prune). An event stays, with
// everything it made, while any of its runs still has work to do or waits for a person (failed):
// retention never takes what a run, a resume or a triage still needs. A caller-chosen API event id
// leaves a tombstone (event-store.ts), so it is never accepted again with the old runs' ids.

import { setImmediate as nextTurn } from 'node:timers/promises';
import { isFinished } from '../../actors/run-work.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerKey } from '../ledger/ledger.ts';
import type { RunKeys, RunStore } from '../runs/run-store.ts';
import type { EventRecord } from './event-codec.ts';
import type { EventStore } from './event-store.ts';
import { ENVIRONMENTS } from '../sources/source-record.ts';
import { OrgDeletedError } from '../ledger/org-fence.ts';

export const DEFAULT_RETENTION_DAYS = 30;
export const DAY_MS = 86_400_000;

export interface HistoryDeps {
  readonly ledger: Ledger;
  readonly events: EventStore;
  readonly runs: RunStore;
}

export interface PrunedHistory {
  readonly events: number;
  readonly runs: number;
}

/**
 * What a pass may read before its transaction (and the main thread) goes on: each event counts 1,
 * each of its runs 1, and each 64 KiB of its record 1 (it is decoded whole, payload included), and
 * of a run snapshot decoded (one indexed before its keys were: RunStore.keysForEvent). Counting
 * events alone, 1,000 events of 300 runs each held the event loop for 5 s, and passes that only keep
 * (events with failed runs) read it all again every prune. Counting each run 1 whatever its size,
 * 40 failed runs of 12 MB of step results each held it for 4 s, every pass.
 */
const RECORD_BYTES_PER_UNIT = 64 * 1024;

/**
 * Removes every event received before `nowMs - retentionMs` whose runs have all finished, with its
 * recording, its runs and their index entries; each transaction reads at most about `passSize`
 * units of work (events, their runs, their size: RECORD_BYTES_PER_UNIT), at least one event.
 * Resolves once all of it is durable, or after the pass in progress once `stop` is aborted (the
 * runtime is closing: the next prune goes on from where this one got).
 */
export async function pruneHistory(deps: HistoryDeps, nowMs: number, retentionMs: number, passSize = 1000, stop?: AbortSignal): Promise<PrunedHistory> {
  const cutoff = nowMs - retentionMs;
  let events = 0;
  let runs = 0;
  // Read whole before the first await: a lazy range held its read snapshot through every pass,
  // and LMDB reuses no page freed after its oldest open snapshot, so the prune grew the file
  // (~0.5 KiB per event pruned) instead of freeing room in it.
  const orgIds = [...(deps.ledger.orgs.getKeys({}) as Iterable<string>)];
  for (const orgId of orgIds) {
    for (const environment of ENVIRONMENTS) {
      let start: LedgerKey = [orgId, environment, 0];
      for (;;) {
        const { candidates, done } = readPass(deps, start, [orgId, environment, cutoff], passSize);
        let pass: PrunedHistory;
        try {
          pass = await removeFinished(deps, candidates, nowMs);
        } catch (error) {
          // Deleted since the list was read: its records go with it (org-deletion.ts); the others' go on.
          if (error instanceof OrgDeletedError) break;
          throw error;
        }
        // A pass that removes nothing does not wait on a write: yield, so requests go on between passes.
        await nextTurn();
        events += pass.events;
        runs += pass.runs;
        const last = candidates.at(-1)?.key;
        if (stop?.aborted === true) return { events, runs };
        if (done || last === undefined) break;
        // Just after the last key read: ids never hold "\u0000".
        start = [orgId, environment, last[2], `${last[3]}\u0000`];
      }
    }
  }
  return { events, runs };
}

type TimeKey = [orgId: string, environment: string, receivedAtMs: number, eventId: string];

/** An event a pass looked at: its time index entry, whether that names it still, and its runs. */
interface Candidate {
  readonly key: TimeKey;
  readonly stale: boolean;
  readonly runs: readonly RunKeys[];
}

/** The next pass's events from `start`, up to `passSize` units of work; `done` when the range ran out first. */
function readPass(deps: HistoryDeps, start: LedgerKey, end: LedgerKey, passSize: number): { candidates: Candidate[]; done: boolean } {
  const candidates: Candidate[] = [];
  let cost = 0;
  for (const key of deps.ledger.eventsByTime.getKeys({ start, end }) as Iterable<TimeKey>) {
    const event = namedEvent(deps, key);
    const { runs, decodedBytes } = event === undefined ? { runs: [], decodedBytes: 0 } : deps.runs.keysForEvent(key[0], key[3]);
    candidates.push({ key, stale: event === undefined, runs });
    cost += 1 + runs.length + Math.floor(((event?.payload_json.length ?? 0) + decodedBytes) / RECORD_BYTES_PER_UNIT);
    if (cost >= passSize) return { candidates, done: false };
  }
  return { candidates, done: true };
}

async function removeFinished(deps: HistoryDeps, candidates: readonly Candidate[], nowMs: number): Promise<PrunedHistory> {
  const { ledger } = deps;
  // Only finished runs may go: the others are still at work or wait for a person to resume them.
  const removable = candidates.filter(({ runs }) => runs.every(isFinished));
  if (removable.length === 0) return { events: 0, runs: 0 };
  return durably(
    ledger.root,
    ledger.root.transaction((): PrunedHistory => {
      let events = 0;
      let runs = 0;
      for (const { key, stale, runs: finished } of removable) {
        // Read again where it is written: the event may have been replaced meanwhile (a sandbox
        // reset, then the same id sent again), and the new one is not this entry's. An entry that
        // names no event (gone, or replaced) would only cost a read every pass: it goes alone.
        // The record as stored: nothing here needs the payload parsed (it may be megabytes, under the write lock).
        const event = namedEvent(deps, key);
        if (event === undefined) {
          ledger.eventsByTime.remove(key);
          continue;
        }
        if (stale) continue;
        deps.events.removeWithin(event, nowMs);
        for (const run of finished) deps.runs.remove(run);
        events += 1;
        runs += finished.length;
      }
      return { events, runs };
    }),
  );
}

/** The event a time index entry names; undefined when the entry is stale (the event is gone, or the id now names a later one). */
function namedEvent(deps: HistoryDeps, [orgId, , receivedAtMs, eventId]: Readonly<TimeKey>): EventRecord | undefined {
  const event = deps.events.getRecord(orgId, eventId);
  return event?.received_at_ms === receivedAtMs ? event : undefined;
}
