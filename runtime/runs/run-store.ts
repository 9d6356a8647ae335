// Durable storage of runs: the persisted run snapshot under [orgId, runId] plus the indexes that
// reactions, listings, boot recovery and failed-event triage read. Writes happen inside a transaction.

import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { SandboxGenerations } from '../events/sandbox-generation.ts';
import type { LedgerKey, LedgerTable } from '../ledger/ledger.ts';
import { asRunId, type EventId, type OrgId, type RunId } from '../../actors/ids.ts';
import type { PersistedRun } from '../../actors/run-transition.ts';
import type { RunStateName } from '../../actors/run-types.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { entryMayMatch, MAX_PAGE_BYTES, pageByTime } from '../ledger/page-by-time.ts';
import { runTimeEntryOf, type RunTimeEntry } from './run-time-index.ts';

/** States with work still to come: the set boot recovery walks. `failed` waits for a person. */
const UNFINISHED: ReadonlySet<RunStateName> = new Set(['queued', 'running', 'backoff', 'delaying']);

/**
 * DESIGN §4: the run id is a function of (org, event, workflow), so a trigger can never make two runs.
 * A sandbox event's runs also take the org's sandbox generation (sandbox-generation.ts): after a
 * reset, a re-sent event id must not reuse the effect keys and fences of the runs it deleted.
 * Generation 0 (production, and the sandbox before its first reset) adds nothing: those ids stay
 * what they always were. `\u0000` cannot occur in org, event or workflow ids.
 */
export function runIdFor(orgId: string, eventId: string, workflowId: string, sandboxGeneration = 0): RunId {
  const generation = sandboxGeneration === 0 ? '' : `\u0000sandbox-generation:${sandboxGeneration}`;
  return asRunId(`run_${createHash('sha256').update(`${orgId}\u0000${eventId}\u0000${workflowId}${generation}`).digest('hex').slice(0, 32)}`);
}

/** Runs-by-time entries read per turn of the event loop by `workflowsNamed`. */
const NAMED_SLICE = 10_000;

/** Failed runs listed per event in the triage list; `failedRuns` counts them all. */
export const FAILED_RUNS_SHOWN = 20;

/**
 * The failed-event index (failed-event triage): [orgId, environment, receivedAtMs, eventId, runId]
 * -> the run's updatedAt when it failed. Ordered by the event's arrival, whatever its id (schedule,
 * device and derived events have hash ids, API callers choose theirs). Replaced `runs-failed`, keyed
 * by event id (failed-index-upgrade.ts moves its entries over at boot).
 */
export const FAILED_INDEX = 'runs-failed-by-arrival';

/** A failed-event triage position: the event's received_at_ms and id. */
export type FailedEventPosition = readonly [receivedAtMs: number, eventId: string];

export interface FailedEvent<T> {
  readonly eventId: EventId;
  /** The event's received_at_ms: what the list is ordered by. */
  readonly receivedAtMs: number;
  /** The views of its first FAILED_RUNS_SHOWN failed runs. */
  readonly runs: T[];
  failedRuns: number;
}

/**
 * What removing a run needs of it: the fields its keys are made of. A snapshot holds every step's
 * results (megabytes), so a pass that removes many runs keeps only these.
 */
export interface RunKeys {
  readonly value: RunStateName;
  readonly context: Pick<PersistedRun['context'], 'orgId' | 'runId' | 'eventId' | 'environment' | 'createdAt'>;
}

export function runKeysOf(run: PersistedRun): RunKeys {
  const { orgId, runId, eventId, environment, createdAt } = run.context;
  return { value: run.value, context: { orgId, runId, eventId, environment, createdAt } };
}

/** What runs-by-event holds per run (null for runs stored before it did): [environment, createdAt]. */
type RunEventEntry = readonly [string, number];

const eventEntryOf = (run: PersistedRun): RunEventEntry => [run.context.environment, run.context.createdAt];

/** A run's keys from its index entries, or undefined when one of them predates what they hold now. */
function indexedKeys(orgId: string, eventId: string, runId: string, entry: unknown, byTime: LedgerTable): RunKeys | undefined {
  if (!Array.isArray(entry)) return undefined;
  const [environment, createdAt] = entry as unknown as RunEventEntry;
  const time = byTime.get([orgId, environment, createdAt, runId]);
  if (!Array.isArray(time)) return undefined;
  // The ids as they were written from the run's context.
  const context = { orgId, runId, eventId, environment, createdAt } as unknown as RunKeys['context'];
  return { value: (time as unknown as RunTimeEntry)[1] as RunStateName, context };
}

export class RunStore {
  readonly #runs: LedgerTable;
  readonly #byEvent: LedgerTable;
  readonly #byTime: LedgerTable;
  readonly #unfinished: LedgerTable;
  readonly #failed: LedgerTable;
  /** Part of every sandbox run's id (runIdFor); advanced by sandbox reset. */
  readonly sandboxGenerations: SandboxGenerations;

  constructor(ledger: Ledger) {
    this.sandboxGenerations = new SandboxGenerations(ledger);
    this.#runs = ledger.openDatabase('runs');
    this.#byEvent = ledger.openDatabase('runs-by-event');
    this.#byTime = ledger.openDatabase('runs-by-time');
    this.#unfinished = ledger.openDatabase('runs-unfinished');
    this.#failed = ledger.openDatabase(FAILED_INDEX);
  }

  get(orgId: string, runId: string): PersistedRun | undefined {
    return this.#runs.get([orgId, runId]) as PersistedRun | undefined;
  }

  /** Whether the run exists, without decoding it. */
  has(orgId: string, runId: string): boolean {
    return this.#runs.doesExist([orgId, runId]);
  }

  /** Writes a snapshot and keeps every index in step with it. Call inside a write transaction. */
  write(run: PersistedRun, previous: PersistedRun | undefined): void {
    const ctx = run.context;
    this.#runs.put([ctx.orgId, ctx.runId], run);
    if (previous === undefined) this.#byEvent.put([ctx.orgId, ctx.eventId, ctx.runId], eventEntryOf(run));
    if (previous === undefined || previous.value !== run.value) this.#byTime.put([ctx.orgId, ctx.environment, ctx.createdAt, ctx.runId], runTimeEntryOf(run));
    const unfinished = UNFINISHED.has(run.value);
    if (previous === undefined || UNFINISHED.has(previous.value) !== unfinished) {
      if (unfinished) this.#unfinished.put([ctx.orgId, ctx.runId], null);
      else this.#unfinished.remove([ctx.orgId, ctx.runId]);
    }
    if (run.value === 'failed') this.indexFailedWithin(run);
    else if (previous?.value === 'failed') this.#failed.remove(failedKey(run));
  }

  /** Puts the failed-event index entry of a failed run. Call inside a write transaction. */
  indexFailedWithin(run: PersistedRun): void {
    this.#failed.put(failedKey(run), run.context.updatedAt);
  }

  /** Removes a run and its index entries (sandbox reset, retention). Call inside a write transaction. */
  remove(run: RunKeys): void {
    const ctx = run.context;
    this.#runs.remove([ctx.orgId, ctx.runId]);
    this.#byEvent.remove([ctx.orgId, ctx.eventId, ctx.runId]);
    this.#byTime.remove([ctx.orgId, ctx.environment, ctx.createdAt, ctx.runId]);
    this.#unfinished.remove([ctx.orgId, ctx.runId]);
    this.#failed.remove(failedKey(run));
  }

  /** Whether the event started any run (its runs are stored in the event's own write). */
  hasRunsFor(orgId: string, eventId: string): boolean {
    const [first] = this.#byEvent.getKeys({ start: [orgId, eventId], end: [orgId, eventId, '\uffff'], limit: 1 });
    return first !== undefined;
  }

  /**
   * `view` of each run of an event. Each snapshot is let go once viewed: an event may have thousands
   * of runs, each holding megabytes of step results.
   */
  forEvent<T>(orgId: string, eventId: string, view: (run: PersistedRun) => T): T[] {
    const views: T[] = [];
    for (const key of this.#byEvent.getKeys({ start: [orgId, eventId], end: [orgId, eventId, '\uffff'] })) {
      const run = this.get(orgId, (key as [string, string, string])[2]);
      if (run !== undefined) views.push(view(run));
    }
    return views;
  }

  /**
   * The keys and state of each run of an event, read from the indexes without decoding a snapshot
   * (runs-by-event names each run's environment and creation time, runs-by-time its state); a run
   * indexed before they did is decoded, and `decodedBytes` counts what that read (a snapshot holds
   * every step's results: megabytes, which a pass over many runs weighs its work by).
   */
  keysForEvent(orgId: string, eventId: string): { readonly runs: RunKeys[]; readonly decodedBytes: number } {
    const runs: RunKeys[] = [];
    let decodedBytes = 0;
    for (const { key, value } of this.#byEvent.getRange({ start: [orgId, eventId], end: [orgId, eventId, '\uffff'] })) {
      const runId = (key as [string, string, string])[2];
      const indexed = indexedKeys(orgId, eventId, runId, value, this.#byTime);
      if (indexed !== undefined) {
        runs.push(indexed);
        continue;
      }
      decodedBytes += this.#runs.getBinaryFast([orgId, runId])?.length ?? 0;
      const run = this.get(orgId, runId);
      if (run !== undefined) runs.push(runKeysOf(run));
    }
    return { runs, decodedBytes };
  }

  /**
   * Which of `candidates` (workflow ids) a run of the org names. Walks the org's runs-by-time
   * entries, which name each run's workflow (a run stored before they did is read), in slices with
   * a turn of the event loop between them: an org may hold a million runs. Resolves early (with what
   * it found so far) when `stop` is aborted.
   */
  async workflowsNamed(orgId: string, candidates: ReadonlySet<string>, stop?: AbortSignal): Promise<Set<string>> {
    const named = new Set<string>();
    let start: LedgerKey = [orgId];
    for (;;) {
      let last: LedgerKey | undefined;
      for (const { key, value } of this.#byTime.getRange({ start, end: [orgId, '\uffff'], limit: NAMED_SLICE })) {
        last = key;
        const workflowId = Array.isArray(value) ? String(value[0]) : this.get(orgId, (key as string[])[3]!)?.context.workflowId;
        if (workflowId !== undefined && candidates.has(workflowId)) named.add(workflowId);
      }
      if (last === undefined || named.size === candidates.size || stop?.aborted === true) return named;
      const [, environment, createdAt, runId] = last as [string, string, number, string];
      start = [orgId, environment, createdAt, `${runId}\u0000`];
      await nextTurn();
    }
  }

  /** Every run that still has work to do, across all orgs: what boot recovery resumes. */
  unfinished(): Array<{ orgId: OrgId; runId: RunId }> {
    return [...this.#unfinished.getKeys({})].map((key) => {
      const [orgId, runId] = key as [OrgId, RunId];
      return { orgId, runId };
    });
  }

  /** Up to `limit` ids of an org's runs that still have work to do, in id order, after `after` (from the first when undefined). */
  unfinishedPageOf(orgId: string, after: RunId | undefined, limit: number): RunId[] {
    const keys = this.#unfinished.getKeys({ start: after === undefined ? [orgId] : [orgId, after], end: [orgId, '\uffff'], limit: limit + 1 });
    const ids = [...keys].map((key) => (key as [OrgId, RunId])[1]);
    return (ids[0] === after ? ids.slice(1) : ids).slice(0, limit);
  }

  /**
   * `view` of each run, newest first within an org and environment; filters by state and workflow;
   * resumes after `cursor`. A snapshot holds its steps' results (up to megabytes): each is let go once
   * viewed, and a page ends, with a cursor, once the snapshots it read pass MAX_PAGE_BYTES stored.
   */
  list<T>(
    orgId: string,
    environment: string,
    filter: { state?: string; workflowId?: string; limit: number; cursor?: [number, string] },
    view: (run: PersistedRun) => T,
  ): { runs: T[]; nextCursor: [number, string] | null } {
    const page = pageByTime(
      this.#byTime,
      [orgId, environment],
      filter.limit,
      filter.cursor,
      (runId, entry) => {
        // The index entry tells most runs that do not match without reading them (a run holds its
        // steps' outputs: decoding 20,000 to find none stalled every tenant).
        if (!entryMayMatch(entry, [filter.workflowId, filter.state])) return undefined;
        const bytes = this.#storedBytes(orgId, runId);
        const run = this.get(orgId, runId);
        const matches = run !== undefined && (filter.state === undefined || run.value === filter.state) && (filter.workflowId === undefined || run.context.workflowId === filter.workflowId);
        return matches ? { view: view(run), bytes } : undefined;
      },
      (item) => item.bytes,
    );
    return { runs: page.items.map((item) => item.view), nextCursor: page.next };
  }

  #storedBytes(orgId: string, runId: string): number {
    return this.#runs.getBinaryFast([orgId, runId])?.length ?? 0;
  }

  /**
   * Events with at least one failed run, with those runs: newest first by the event's arrival
   * (received_at_ms; events of one millisecond by id, highest first), `limit` events per page,
   * continuing below `before`. An event's place never moves (a later failure of another of its runs
   * joins it there), so a cursor neither skips nor repeats events while failures come in (one that
   * comes in above it, such as a new event's, shows on a listing from the top). Reads only the index
   * entries of the events on the page. Each lists `view` of at most FAILED_RUNS_SHOWN of its failed
   * runs (an event can trigger thousands of workflows) and counts them all. As `list`, a page ends
   * once the snapshots it read pass MAX_PAGE_BYTES stored (after a whole event).
   */
  failedEvents<T>(
    orgId: string,
    environment: string,
    limit: number,
    before: FailedEventPosition | undefined,
    view: (run: PersistedRun) => T,
  ): { events: FailedEvent<T>[]; nextCursor: FailedEventPosition | null } {
    const events: FailedEvent<T>[] = [];
    let bytes = 0;
    // Reverse: from the highest key below the cursor's event (its own [..., at, event, run] keys sort above it).
    const start = before === undefined ? [orgId, environment, Number.MAX_SAFE_INTEGER] : [orgId, environment, before[0], before[1]];
    for (const key of this.#failed.getKeys({ start, end: [orgId, environment], reverse: true })) {
      const [, , receivedAtMs, eventId, runId] = key as [string, string, number, string, string];
      let current = events.at(-1);
      if (current === undefined || current.eventId !== eventId || current.receivedAtMs !== receivedAtMs) {
        if (current !== undefined && (events.length === limit || bytes >= MAX_PAGE_BYTES)) return { events, nextCursor: [current.receivedAtMs, current.eventId] };
        current = { eventId: eventId as EventId, receivedAtMs, runs: [], failedRuns: 0 };
        events.push(current);
      }
      current.failedRuns += 1;
      if (current.runs.length >= FAILED_RUNS_SHOWN) continue;
      bytes += this.#storedBytes(orgId, runId);
      const run = this.get(orgId, runId);
      if (run !== undefined) current.runs.push(view(run));
    }
    return { events, nextCursor: null };
  }

  /** Every run of an org's environment (sandbox reset walks this). */
  *allIn(orgId: string, environment: string): Generator<PersistedRun> {
    for (const key of this.#byTime.getKeys({ start: [orgId, environment], end: [orgId, environment, Number.MAX_SAFE_INTEGER] })) {
      const run = this.get(orgId, (key as [string, string, number, string])[3]);
      if (run !== undefined) yield run;
    }
  }
}

/** A run's key in the failed-event index. Its createdAt is its event's received_at_ms (run-creation.ts). */
function failedKey(run: RunKeys): [string, string, number, string, string] {
  const ctx = run.context;
  return [ctx.orgId, ctx.environment, ctx.createdAt, ctx.eventId, ctx.runId];
}
