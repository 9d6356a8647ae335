// The XState actors of the runs that hold a slot (`running`), each with its last durable snapshot;
// every other run rests as its snapshot in the ledger and gets an actor again when it moves on.
// A running run holding many step results rests too (held-results.ts): only its state and fence stay.

import { restoreRunActor, type PersistedRun, type RunActor } from '../../actors/run-transition.ts';
import type { RunStateName } from '../../actors/run-types.ts';
import { heldResultBytes } from './held-results.ts';

export interface LiveRun {
  readonly actor: RunActor;
  /** What the ledger holds for this run: the engine is its only writer while the actor lives. */
  persisted: PersistedRun;
  /** What its step results weigh (heldResultBytes), kept up to date by the engine as results come. */
  resultBytes: number;
}

/** Where a run stands in its last durable snapshot: what decides whether an attempt out is still wanted. */
export interface DurableStand {
  readonly value: RunStateName;
  readonly fence: number;
}

/** A resting run: where it stands, and what its results weigh (not worked out again when it is read back). */
interface Resting extends DurableStand {
  readonly resultBytes: number;
}

/** Live actors by run key (orgScopedKey). */
export class LiveActors {
  readonly #live = new Map<string, LiveRun>();
  /** Running runs without a live actor (rest), with where their durable snapshot stands. */
  readonly #resting = new Map<string, Resting>();

  get(key: string): LiveRun | undefined {
    return this.#live.get(key);
  }

  /** Keeps a started actor live, with the durable snapshot it is at. */
  keep(key: string, actor: RunActor, persisted: PersistedRun): LiveRun {
    const resting = this.#resting.get(key);
    // A run read back from rest is at the snapshot it rested as: the engine is its only writer.
    const live = { actor, persisted, resultBytes: resting?.resultBytes ?? heldResultBytes(persisted) };
    this.#resting.delete(key);
    this.#live.set(key, live);
    return live;
  }

  /** Starts an actor at a durable snapshot and keeps it live. */
  restore(key: string, run: PersistedRun): LiveRun {
    return this.keep(key, restoreRunActor(run).start(), run);
  }

  /** The run's live actor `live` stops and it rests as its durable snapshot `run`, of which only where it stands is kept. */
  rest(key: string, live: LiveRun, run: PersistedRun): void {
    live.actor.stop();
    this.#live.delete(key);
    this.#resting.set(key, { value: run.value, fence: run.context.fence, resultBytes: live.resultBytes });
  }

  /**
   * A running run whose step results weigh more than `limit` rests as its durable snapshot `run`
   * once its work is under way (held-results.ts): its next transition reads it back. Not a run let
   * go meanwhile (`live` no longer its entry: a sandbox reset removed it while its write was
   * flushed): it keeps no entry, so whether its attempt is still wanted is read from the ledger (gone).
   */
  restIfHeavy(key: string, live: LiveRun, run: PersistedRun, limit: number): void {
    if (run.value === 'running' && live.resultBytes > limit && this.#live.get(key) === live) this.rest(key, live, run);
  }

  /** Where the run's last durable snapshot stands, if the run is live or resting (else: read the ledger). */
  standOf(key: string): DurableStand | undefined {
    const live = this.#live.get(key);
    return live === undefined ? this.#resting.get(key) : { value: live.persisted.value, fence: live.persisted.context.fence };
  }

  /** How many runs are resting (running, without a live actor). */
  get restingCount(): number {
    return this.#resting.size;
  }

  /** The run's actor, if live, stops and the run rests as its snapshot, forgotten here. */
  drop(key: string): void {
    this.#live.get(key)?.actor.stop();
    this.#live.delete(key);
    this.#resting.delete(key);
  }

  stopAll(): void {
    for (const live of this.#live.values()) live.actor.stop();
    this.#live.clear();
    this.#resting.clear();
  }
}
