// Creates the runs an event starts, inside the transaction that stores the event: one run per
// matching workflow, with a deterministic id (for a sandbox event, per sandbox generation). A run
// whose org has a free slot and nothing waiting is admitted on the spot: `queued` and
// `run.admitted` are both applied and persisted (with both live updates) in that transaction,
// which spares the run a transaction and an fsync of its own. Every run is computed before any of
// them is written, so a failure part way leaves the event's batch with nothing of it.

import { asEventId, asOrgId, type OrgId, type RunId } from '../../actors/ids.ts';
import { KeyedCounts } from '../../actors/keyed-counts.ts';
import { persistedRunOf, startRunActor, type PersistedRun, type RunActor } from '../../actors/run-transition.ts';
import type { Environment } from '../../actors/run-types.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';
import type { StoredEvent } from '../events/event-record.ts';
import type { PreparedReaction } from '../events/event-store.ts';
import type { RunUpdate } from '../rooms/live-codec.ts';
import type { NewRunUpdate, UpdateLog } from '../rooms/update-log.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';
import { runInputFor } from '../workflows/run-plan.ts';
import { runIdFor, type RunStore } from './run-store.ts';

/** What run creation needs from the engine that owns admission and live actors. */
export interface RunCreationHost {
  readonly runs: RunStore;
  readonly updateLog: UpdateLog;
  matching(event: StoredEvent): readonly WorkflowVersion[];
  updateFor(run: PersistedRun, version: WorkflowVersion): NewRunUpdate;
  /** Admits a new run on the spot if its org's environment has a free slot and nothing waiting (RootScheduler.admitNow). */
  admitNow(orgId: OrgId, runId: RunId, environment: Environment): boolean;
  /** Gives back a slot taken by `admitNow` (the creating transaction did not commit). */
  release(orgId: OrgId, runId: RunId): void;
  /** The creating transaction is durable: publish the updates and act on each new run (the metrics count it created; those it committed unconfirmed are counted when picked up: stall-resume.ts). */
  started(orgId: OrgId, updates: RunUpdate[], runs: ReadonlyArray<{ run: PersistedRun; actor: RunActor }>): void;
  /** Slots may have been given back: admit what waits. */
  pump(): void;
  /** The creating transaction committed but its flush failed: pick these runs up from the ledger later. */
  unconfirmed(orgId: OrgId, runIds: readonly RunId[]): void;
}

/** A run computed for a new event, written by the reaction's `write`. */
interface NewRun {
  readonly run: PersistedRun;
  readonly actor: RunActor;
  readonly admitted: boolean;
  /**
   * Its live updates with their seqs, reserved when the run is computed (reading the org's last seq
   * is the one read its writes would need): `queued`, and `running` if admitted on the spot.
   */
  readonly updates: RunUpdate[];
}

export class RunCreation {
  readonly #host: RunCreationHost;
  /**
   * Per org and environment (orgScopedKey), runs written as `queued` whose transaction has not
   * settled yet: the scheduler learns of them only after the commit, so until then no later run of
   * the org's environment may be admitted on the spot ahead of them (admission stays first in,
   * first out, in each environment's queue: org-admission.ts).
   */
  readonly #queuedInFlight = new KeyedCounts();
  /**
   * Per run (orgScopedKey), what settles once its creating write has (committed and its actor
   * started, abandoned, or committed unconfirmed). A run can be read once that write commits, before
   * its flush: a command that comes meanwhile (a cancel through the API) waits for it. Applied at
   * once, a cancel was undone by the actor the run then started with, which sent its steps and
   * wrote `completed` over `cancelled` (found by a probe).
   */
  readonly #settling = new Map<string, Promise<void>>();

  constructor(host: RunCreationHost) {
    this.#host = host;
  }

  /** What settles once the run's creating write has, while it has not. */
  settling(key: string): Promise<void> | undefined {
    return this.#settling.get(key);
  }

  /** Holds commands for `created` until the returned release (idempotent) is called. */
  #holdCommands(created: readonly NewRun[]): () => void {
    const keys = created.map(({ run }) => orgScopedKey(run.context.orgId, run.context.runId));
    let done: () => void = () => undefined;
    const settled = new Promise<void>((resolve) => (done = resolve));
    for (const key of keys) this.#settling.set(key, settled);
    return () => {
      for (const key of keys) if (this.#settling.get(key) === settled) this.#settling.delete(key);
      done();
    };
  }

  /** The org's runs of `environment` written as `queued` whose transaction has not settled yet. */
  queuedInFlight(orgId: OrgId, environment: Environment): number {
    return this.#queuedInFlight.get(orgScopedKey(orgId, environment));
  }

  /**
   * Call inside the event-storing transaction (an event-store reactor). Computes every run first;
   * the writes are queued by the returned reaction's `write`, after the event's own.
   */
  createRuns(event: StoredEvent): PreparedReaction | undefined {
    const host = this.#host;
    const versions = host.matching(event);
    if (versions.length === 0) return undefined;
    const orgId = asOrgId(event.org_id);
    const created: NewRun[] = [];
    const settleWaiting = (): void => {
      this.#queuedInFlight.subtract(orgScopedKey(orgId, event.environment), created.filter((c) => !c.admitted).length);
    };
    const undoInMemory = (): void => {
      settleWaiting();
      for (const { run, actor, admitted } of created) {
        actor.stop();
        if (admitted) host.release(orgId, run.context.runId);
      }
      host.pump();
    };
    // Read inside the storing write: a transaction ordered after a reset sees its generation, and API
    // events wait out a reset in flight before their batch is made (sandbox-generation.ts).
    const generation = event.environment === 'sandbox' ? host.runs.sandboxGenerations.current(orgId) : 0;
    try {
      for (const version of versions) {
        const runId = runIdFor(orgId, event.id, version.workflow_id, generation);
        if (host.runs.has(orgId, runId)) continue;
        created.push(this.#newRun(version, runId, event));
      }
    } catch (error) {
      undoInMemory();
      throw error;
    }
    const release = this.#holdCommands(created);
    return {
      // Each run before its updates: a put that throws part way leaves no update of a run not written.
      write: () => {
        for (const { run, updates } of created) {
          host.runs.write(run, undefined);
          for (const update of updates) host.updateLog.store(orgId, update);
        }
      },
      committed: () => {
        settleWaiting();
        try {
          host.started(orgId, created.flatMap(({ updates }) => updates), created);
        } finally {
          release();
        }
      },
      abandoned: () => {
        try {
          undoInMemory();
        } finally {
          release();
        }
      },
      // Committed, not known to be on disk: the stalled-run path picks each run up from the ledger
      // after its pause (a run not in it gives back its slot). Queued runs reach the scheduler only
      // then, so a later event of the org may be admitted ahead of them; their live updates are
      // skipped as gaps (they stay in the log for replays).
      unflushed: () => {
        settleWaiting();
        try {
          for (const { actor } of created) actor.stop();
          host.unconfirmed(orgId, created.map(({ run }) => run.context.runId));
        } finally {
          release();
        }
      },
    };
  }

  /** Starts the run's actor, admits it on the spot if it may and reserves its updates' seqs; writes nothing. */
  #newRun(version: WorkflowVersion, runId: RunId, event: StoredEvent): NewRun {
    const host = this.#host;
    const orgId = asOrgId(event.org_id);
    const input = runInputFor(version, { runId, eventId: asEventId(event.id), skipSideEffects: event.replay_skip_side_effects, at: event.received_at_ms });
    const { actor, run: queued } = startRunActor(input);
    const waiting = orgScopedKey(orgId, event.environment);
    const admitted = this.#queuedInFlight.get(waiting) === 0 && host.admitNow(orgId, runId, event.environment);
    try {
      const newUpdates = [host.updateFor(queued, version)];
      let run = queued;
      if (admitted) {
        actor.send({ type: 'run.admitted', at: event.received_at_ms });
        run = persistedRunOf(actor);
        newUpdates.push(host.updateFor(run, version));
      }
      const updates = newUpdates.map((update) => host.updateLog.reserve(orgId, update));
      if (!admitted) this.#queuedInFlight.add(waiting);
      return { run, actor, admitted, updates };
    } catch (error) {
      actor.stop();
      if (admitted) host.release(orgId, runId);
      throw error;
    }
  }
}
