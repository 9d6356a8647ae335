// Fences and idempotency for recorded invocations: the highest fence per (org, run), the completed
// result per (org, idempotency key), and in-flight coalescing so one key never executes twice at once.
import type { InvocationResult } from './invocation-outcome.ts';
import { IdempotencyKeyReusedError, StaleFenceError } from './runner-error.ts';
import type { FenceKey, InvocationKey, InvocationRecord, RunnerStore } from './store.ts';

export interface InvocationClaim {
  readonly orgId: string;
  readonly actionId: string;
  readonly digest: string;
  readonly idempotencyKey: string;
  readonly runId: string;
  readonly fence: bigint;
}

export interface LedgerAnswer {
  readonly result: InvocationResult;
  /** True when the result comes from another execution (stored, or in flight and joined). */
  readonly replayed: boolean;
}

interface InFlight {
  readonly claim: InvocationClaim;
  readonly execution: Promise<InvocationResult>;
  /** Callers that joined this execution instead of running the key again. */
  joined: number;
}

const assertSameAction = (claim: InvocationClaim, other: { actionId: string; digest: string }): void => {
  if (claim.actionId !== other.actionId || claim.digest !== other.digest) throw new IdempotencyKeyReusedError();
};

export class InvocationLedger {
  readonly #store: RunnerStore;
  readonly #now: () => number;
  readonly #inFlight = new Map<string, InFlight>();

  constructor(store: RunnerStore, now: () => number) {
    this.#store = store;
    this.#now = now;
  }

  /**
   * Runs `execute` at most once per (org, idempotency key), in this order:
   * 1. refuse a fence lower than the run's highest (StaleFenceError); a higher one is recorded durably;
   * 2. a completed key answers its stored result (`replayed`), without executing;
   * 3. a key executing right now is joined: the caller waits for that execution (`replayed`);
   * 4. otherwise execute, then record the result durably before answering.
   * Every answer is given only after the writes it depends on are flushed. A failed `execute`
   * (a thrown error, not a trap) records nothing, so the next attempt runs again.
   */
  async run(claim: InvocationClaim, execute: () => Promise<InvocationResult>): Promise<LedgerAnswer> {
    await this.#admitFence(claim);
    const key: InvocationKey = [claim.orgId, claim.idempotencyKey];
    const slot = `${claim.orgId}\0${claim.idempotencyKey}`;
    // From here to registering the execution there is no await: the read, the in-flight check and
    // the registration are atomic, and an execution leaves the map only after its record committed.
    const completed = this.#store.invocations.get(key);
    if (completed !== undefined) {
      assertSameAction(claim, completed);
      await this.#store.flushed();
      return { result: { outcome: completed.outcome, fuelUsed: completed.fuelUsed }, replayed: true };
    }
    const running = this.#inFlight.get(slot);
    if (running !== undefined) {
      assertSameAction(claim, running.claim);
      running.joined += 1;
      return { result: await running.execution, replayed: true };
    }
    const execution = this.#executeAndRecord(claim, key, execute);
    this.#inFlight.set(slot, { claim, execution, joined: 0 });
    try {
      return { result: await execution, replayed: false };
    } finally {
      if (this.#inFlight.get(slot)?.execution === execution) this.#inFlight.delete(slot);
    }
  }

  /** How many callers wait on the execution of a key now running, or undefined (diagnostics, tests). */
  joinedCount(orgId: string, idempotencyKey: string): number | undefined {
    return this.#inFlight.get(`${orgId}\0${idempotencyKey}`)?.joined;
  }

  /** The highest fence recorded for a run, if any (for diagnostics and tests). */
  highestFence(orgId: string, runId: string): bigint | undefined {
    const stored = this.#store.fences.get([orgId, runId]);
    return stored === undefined ? undefined : BigInt(stored);
  }

  async #admitFence(claim: InvocationClaim): Promise<void> {
    const fenceKey: FenceKey = [claim.orgId, claim.runId];
    const seen = this.highestFence(claim.orgId, claim.runId);
    // Fences only grow, so a committed value at or above ours decides without a write transaction.
    if (seen !== undefined && seen > claim.fence) throw new StaleFenceError(claim.fence, seen);
    if (seen === claim.fence) return;
    const fences = this.#store.fences;
    const highest = await this.#store.durable(fences.transaction(() => {
      const stored = fences.get(fenceKey);
      const current = stored === undefined ? 0n : BigInt(stored);
      if (current >= claim.fence) return current;
      fences.putSync(fenceKey, claim.fence.toString());
      return claim.fence;
    }));
    if (highest > claim.fence) throw new StaleFenceError(claim.fence, highest);
  }

  async #executeAndRecord(claim: InvocationClaim, key: InvocationKey, execute: () => Promise<InvocationResult>): Promise<InvocationResult> {
    const result = await execute();
    const record: InvocationRecord = {
      actionId: claim.actionId,
      digest: claim.digest,
      fence: claim.fence.toString(),
      outcome: result.outcome,
      fuelUsed: result.fuelUsed,
      completedAtMs: this.#now(),
    };
    await this.#store.durable(this.#store.invocations.put(key, record));
    return result;
  }
}
