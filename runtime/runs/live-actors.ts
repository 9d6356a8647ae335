// The XState actors of the runs that hold a slot (`running`), each with its last durable snapshot;
// every other run rests as its snapshot in the ledger and gets an actor again when it moves on.

import { restoreRunActor, type PersistedRun, type RunActor } from '../../actors/run-transition.ts';

export interface LiveRun {
  readonly actor: RunActor;
  /** What the ledger holds for this run: the engine is its only writer while the actor lives. */
  persisted: PersistedRun;
}

/** Live actors by run key (orgScopedKey). */
export class LiveActors {
  readonly #live = new Map<string, LiveRun>();

  get(key: string): LiveRun | undefined {
    return this.#live.get(key);
  }

  /** Keeps a started actor live, with the durable snapshot it is at. */
  keep(key: string, actor: RunActor, persisted: PersistedRun): void {
    this.#live.set(key, { actor, persisted });
  }

  /** Starts an actor at a durable snapshot and keeps it live. */
  restore(key: string, run: PersistedRun): LiveRun {
    const live = { actor: restoreRunActor(run).start(), persisted: run };
    this.#live.set(key, live);
    return live;
  }

  /** The run's actor, if live, stops and rests as its snapshot. */
  drop(key: string): void {
    this.#live.get(key)?.actor.stop();
    this.#live.delete(key);
  }

  stopAll(): void {
    for (const live of this.#live.values()) live.actor.stop();
    this.#live.clear();
  }
}
