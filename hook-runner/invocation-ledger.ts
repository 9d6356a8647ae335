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

const larger = (a: bigint, b: bigint): bigint => (a > b ? a : b);
/** The in-memory key of a claim's run. */
const runSlotOf = (claim: InvocationClaim): string => `${claim.orgId}\0${claim.runId}`;

export class InvocationLedger {
  readonly #store: RunnerStore;
  readonly #now: () => number;
  readonly #inFlight = new Map<string, InFlight>();
  /** Fences admitted in this process and not yet committed, per (org, run); checked with the committed ones. */
  readonly #admitted = new Map<string, bigint>();

  constructor(store: RunnerStore, now: () => number) {
    this.#store = store;
    this.#now = now;
  }

  /**
   * Runs `execute` at most once per (org, idempotency key), in this order:
   * 1. refuse a fence lower than the highest committed or admitted for the run (StaleFenceError);
   * 2. a completed key answers its stored result (`replayed`), without executing;
   * 3. a key executing right now is joined: the caller waits for that execution (`replayed`);
   * 4. otherwise execute, then commit the result and the run's fence in one transaction and answer
   *    once it is flushed: one fsync per call, shared with concurrent calls (group commit).
   * A fence becomes durable with the write that answers its call. A crash during an execution
   * forgets that fence, which is harmless: nobody saw an answer, and a guest run is a pure
   * function (no imports, DESIGN 6.5), so a re-run under any fence yields the same result.
   * A failed `execute` (a thrown error, not a trap) records only the fence, so the next attempt runs again.
   */
  async run(claim: InvocationClaim, execute: () => Promise<InvocationResult>): Promise<LedgerAnswer> {
    this.#refuseStaleFence(claim);
    const key: InvocationKey = [claim.orgId, claim.idempotencyKey];
    const slot = `${claim.orgId}\0${claim.idempotencyKey}`;
    // From here to registering the execution there is no await: the read, the in-flight check and
    // the registration are atomic, and an execution leaves the map only after its record committed.
    const completed = this.#store.invocations.get(key);
    if (completed !== undefined) {
      assertSameAction(claim, completed);
      this.#admitFence(claim);
      await this.#commit(claim, () => undefined);
      return { result: { outcome: completed.outcome, fuelUsed: completed.fuelUsed }, replayed: true };
    }
    const running = this.#inFlight.get(slot);
    if (running !== undefined) {
      assertSameAction(claim, running.claim);
      this.#admitFence(claim);
      running.joined += 1;
      const result = await running.execution;
      // The execution's own write may have been decided before this caller's fence was admitted.
      await this.#commit(claim, () => undefined);
      return { result, replayed: true };
    }
    this.#admitFence(claim);
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

  /** The highest fence committed for a run, if any (for diagnostics and tests). */
  highestFence(orgId: string, runId: string): bigint | undefined {
    const stored = this.#store.fences.get([orgId, runId]);
    return stored === undefined ? undefined : BigInt(stored);
  }

  /** The run's highest fence: committed, or admitted in this process and not yet committed. */
  #highestKnown(claim: InvocationClaim): bigint {
    return larger(this.highestFence(claim.orgId, claim.runId) ?? 0n, this.#admitted.get(runSlotOf(claim)) ?? 0n);
  }

  /** Refuses a stale fence at once, without a write: fences only grow, in memory and on disk. */
  #refuseStaleFence(claim: InvocationClaim): void {
    const highest = this.#highestKnown(claim);
    if (highest > claim.fence) throw new StaleFenceError(claim.fence, highest);
  }

  /** Records an accepted call's fence in memory until a write commits it. */
  #admitFence(claim: InvocationClaim): void {
    if (claim.fence > this.#highestKnown(claim)) this.#admitted.set(runSlotOf(claim), claim.fence);
  }

  /**
   * One flushed batch (a single transaction): `write`, plus the run's highest fence when it is above
   * the stored one. The value is decided here, on the main thread, without a transaction callback
   * (which would cost the write thread a round trip to this one): the committed fence and the fences
   * admitted in this process bound every fence of the run, and both only grow, so a later batch never
   * writes a lower value. Afterwards the in-memory entry is dropped unless a higher fence arrived.
   */
  async #commit(claim: InvocationClaim, write: (at: number) => void): Promise<void> {
    const fences = this.#store.fences;
    const fenceKey: FenceKey = [claim.orgId, claim.runId];
    const runSlot = runSlotOf(claim);
    const stored = this.highestFence(claim.orgId, claim.runId) ?? 0n;
    const highest = larger(stored, larger(claim.fence, this.#admitted.get(runSlot) ?? 0n));
    const at = this.#now();
    await this.#store.durable(
      fences.batch(() => {
        write(at);
        if (highest > stored) {
          void fences.put(fenceKey, highest.toString());
          void this.#store.fencesByTime.put([at, claim.orgId, claim.runId], highest.toString());
        }
      }),
    );
    if ((this.#admitted.get(runSlot) ?? 0n) <= highest) this.#admitted.delete(runSlot);
  }

  async #executeAndRecord(claim: InvocationClaim, key: InvocationKey, execute: () => Promise<InvocationResult>): Promise<InvocationResult> {
    let result: InvocationResult;
    try {
      result = await execute();
    } catch (error) {
      await this.#commit(claim, () => undefined);
      throw error;
    }
    await this.#commit(claim, (at) => {
      const record: InvocationRecord = {
        actionId: claim.actionId,
        digest: claim.digest,
        fence: claim.fence.toString(),
        outcome: result.outcome,
        fuelUsed: result.fuelUsed,
        completedAtMs: at,
      };
      void this.#store.invocations.put(key, record);
      void this.#store.invocationsByTime.put([at, key[0], key[1]], null);
    });
    return result;
  }
}
