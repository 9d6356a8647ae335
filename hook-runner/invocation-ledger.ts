// Fences and idempotency for recorded invocations: the highest fence per (org, run), the successful
// output per (org, idempotency key), and in-flight coalescing so one key never executes twice at once.
import type { InvocationResult } from './invocation-outcome.ts';
import { IdempotencyKeyReusedError, InvokeAbandonedError, OrganizationForgottenError, StaleFenceError } from './runner-error.ts';
import type { FenceKey, InvocationKey, InvocationRecord, RunnerStore } from './store.ts';

export interface InvocationClaim {
  readonly orgId: string;
  readonly actionId: string;
  readonly digest: string;
  /** The guest's other inputs: its approved permissions and the revision of the secrets they name (see `run`). */
  readonly inputs: string;
  readonly idempotencyKey: string;
  readonly runId: string;
  readonly fence: bigint;
}

export interface LedgerAnswer {
  readonly result: InvocationResult;
  /** True when the result comes from another execution (stored, or in flight and joined). */
  readonly replayed: boolean;
}

/** Says whether a caller has gone (its call was cancelled or its deadline passed). */
export type GaveUp = () => boolean;

/**
 * One guest run of a claim. `wanted` says whether any caller still waits for it (the one that
 * started it, or one that joined it since): asked when the guest's turn comes, so that a run nobody
 * waits for any more is dropped there, unrun and unrecorded (InvokeAbandonedError).
 */
export type Execution = (wanted: () => boolean) => Promise<ExecutedResult>;

/** An execution's result, with the inputs the guest really ran with. */
export interface ExecutedResult extends InvocationResult {
  /**
   * Its inputs as read when its guest's turn came (secrets are read then): recorded with the output
   * instead of the claim's, which were read when the call arrived and differ when a secret was
   * written or deleted while it waited.
   */
  readonly ranWith?: string;
}

interface InFlight {
  readonly claim: InvocationClaim;
  readonly execution: Promise<InvocationResult>;
  /** One check per caller waiting on this execution: the one that started it, then those that joined it. */
  readonly callers: GaveUp[];
}

/**
 * A key names one action: the runtime's key is `<runId>:<stepId>` and a run pins its workflow
 * version, so a step's key never moves to another action. Another action id under a known key is a
 * reused key (another caller, or a runtime whose data was reset), and answering it with the first
 * action's output (computed with that action's secrets) would be wrong, so it is refused. A new
 * module digest of the same action is not: an approved new version is how a failed run is fixed
 * and resumed, and a retry can carry it after the key already completed (see `run`).
 */
const assertSameAction = (claim: InvocationClaim, other: { actionId: string }): void => {
  if (claim.actionId !== other.actionId) throw new IdempotencyKeyReusedError();
};

/**
 * The key's stored output, if it completed. Only an output completes a key: records holding a trap
 * or a rejection were written by earlier releases and count as absent, so such a step runs again.
 */
const completedOutput = (record: InvocationRecord | undefined): InvocationRecord | undefined =>
  record?.outcome.kind === 'output' ? record : undefined;

/** Whether a stored or running execution is the one `claim` asks for: the same module given the same inputs. */
const sameExecution = (claim: InvocationClaim, other: { digest: string; inputs?: string }): boolean =>
  other.digest === claim.digest && (other.inputs === undefined || other.inputs === claim.inputs);

const larger = (a: bigint, b: bigint): bigint => (a > b ? a : b);
/** The in-memory key of a claim's run. */
const runSlotOf = (claim: InvocationClaim): string => `${claim.orgId}\0${claim.runId}`;

export class InvocationLedger {
  readonly #store: RunnerStore;
  readonly #now: () => number;
  /** Whether the org was forgotten (forgotten-orgs.ts): a call of it that was running then stores nothing. */
  readonly #forgotten: (orgId: string) => boolean;
  readonly #inFlight = new Map<string, InFlight>();
  /** Fences admitted in this process and not yet committed, per (org, run); checked with the committed ones. */
  readonly #admitted = new Map<string, bigint>();

  constructor(store: RunnerStore, now: () => number, forgotten: (orgId: string) => boolean = () => false) {
    this.#store = store;
    this.#now = now;
    this.#forgotten = forgotten;
  }

  /**
   * Runs `execute` until it yields an output, at most once at a time per (org, idempotency key):
   * 1. refuse a fence lower than the highest committed or admitted for the run (StaleFenceError);
   * 2. a completed key called with the same module digest and the same inputs answers its stored
   *    output (`replayed`) without executing. Called with another digest or other inputs (a version
   *    approved since, with other permissions, or a secret written since: how a person fixes a
   *    failed run before resuming it), it executes again and its output replaces the stored one:
   *    the runtime applies a step's effects only in
   *    the write that commits its result, so a key it still asks about has applied nothing from the
   *    earlier output (which may even have broken the output contract), and the step's evidence
   *    then names the module that really produced its result;
   * 3. a key executing right now with the same digest and inputs is joined: the caller waits for
   *    that execution (`replayed`), which stays wanted while any of its callers still waits
   *    (`gaveUp` is this caller's check); a caller naming another digest or other inputs does not
   *    join (its wait keeps no one else's execution wanted): it waits for that one to finish, then
   *    starts over from 1;
   * 4. otherwise execute, then commit the output (only an output) and the run's fence in one
   *    transaction and answer once it is flushed: one fsync per call, shared with concurrent calls
   *    (group commit).
   * A trap or a rejection is answered but not stored, so the next attempt of the key (a retry, or a
   * resume after a fixed version was approved) runs again; the guest is pure (no imports, DESIGN
   * 6.5), so re-running it costs fuel and has no effect. Its fence is committed before the answer
   * all the same, as is the fence of a failed `execute` (a thrown error): every answered call's
   * fence is durable. A crash during an execution forgets that fence, which is harmless: nobody saw
   * an answer, and a re-run under any fence yields the same result.
   */
  async run(claim: InvocationClaim, execute: Execution, gaveUp: GaveUp = () => false): Promise<LedgerAnswer> {
    // Also on every start over (a joiner whose execution was dropped, or ran another module).
    if (this.#forgotten(claim.orgId)) throw new OrganizationForgottenError();
    this.#refuseStaleFence(claim);
    const key: InvocationKey = [claim.orgId, claim.idempotencyKey];
    const slot = `${claim.orgId}\0${claim.idempotencyKey}`;
    // From here to registering the execution there is no await: the read, the in-flight check and
    // the registration are atomic, and an execution leaves the map only after its record committed.
    const completed = completedOutput(this.#store.invocations.get(key));
    if (completed !== undefined) assertSameAction(claim, completed);
    if (completed !== undefined && sameExecution(claim, completed)) {
      this.#admitFence(claim);
      await this.#commit(claim, () => undefined);
      return { result: { outcome: completed.outcome, fuelUsed: completed.fuelUsed }, replayed: true };
    }
    const running = this.#inFlight.get(slot);
    if (running !== undefined) {
      assertSameAction(claim, running.claim);
      this.#admitFence(claim);
      // Another module's (or other inputs') answer is not this caller's. That execution leaves the
      // map (below) when it settles, so this caller then starts over and runs its own.
      if (!sameExecution(claim, running.claim)) {
        await running.execution.catch(() => undefined);
        return this.run(claim, execute, gaveUp);
      }
      running.callers.push(gaveUp);
      // The execution's own write may have been decided before this caller's fence was admitted:
      // this caller commits its fence before it answers, whether the execution gave a result or threw.
      let result: InvocationResult;
      try {
        result = await running.execution;
      } catch (error) {
        // Dropped when its slot came because every caller had gone (this one too, unless it joined
        // after that): one still waiting runs the key itself instead of inheriting the drop.
        if (!(error instanceof InvokeAbandonedError) || gaveUp()) throw error;
        return this.run(claim, execute, gaveUp);
      } finally {
        await this.#commit(claim, () => undefined);
      }
      return { result, replayed: true };
    }
    this.#admitFence(claim);
    // Filled before the execution can ask (it awaits before its guest's turn), extended by joiners.
    const callers: GaveUp[] = [gaveUp];
    // An org forgotten before the guest's turn came: its guest is dropped unrun.
    const wanted = (): boolean => !this.#forgotten(claim.orgId) && !callers.every((gone) => gone());
    // The entry leaves the map before anyone awaiting the execution resumes.
    const execution: Promise<InvocationResult> = this.#executeAndRecord(claim, key, () => execute(wanted)).finally(() => {
      if (this.#inFlight.get(slot)?.execution === execution) this.#inFlight.delete(slot);
    });
    this.#inFlight.set(slot, { claim, execution, callers });
    return { result: await execution, replayed: false };
  }

  /** How many callers joined the execution of a key now running (given up or not), or undefined (diagnostics, tests). */
  joinedCount(orgId: string, idempotencyKey: string): number | undefined {
    const running = this.#inFlight.get(`${orgId}\0${idempotencyKey}`);
    return running === undefined ? undefined : running.callers.length - 1;
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
    // Decided in the turn the write is queued: a removal of the org reads the tables only once its
    // mark is durable, and the mark is queued after this write if this write goes ahead.
    if (this.#forgotten(claim.orgId)) {
      this.#admitted.delete(runSlotOf(claim));
      return;
    }
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

  async #executeAndRecord(claim: InvocationClaim, key: InvocationKey, execute: () => Promise<ExecutedResult>): Promise<InvocationResult> {
    let result: ExecutedResult;
    try {
      result = await execute();
    } catch (error) {
      await this.#commit(claim, () => undefined);
      // Dropped before its turn because the org was forgotten meanwhile: said as such.
      if (error instanceof InvokeAbandonedError && this.#forgotten(claim.orgId)) throw new OrganizationForgottenError();
      throw error;
    }
    const { ranWith, ...answer } = result;
    if (answer.outcome.kind !== 'output') {
      await this.#commit(claim, () => undefined);
      return answer;
    }
    await this.#commit(claim, (at) => {
      const record: InvocationRecord = {
        actionId: claim.actionId,
        digest: claim.digest,
        inputs: ranWith ?? claim.inputs,
        fence: claim.fence.toString(),
        outcome: answer.outcome,
        fuelUsed: answer.fuelUsed,
        completedAtMs: at,
      };
      void this.#store.invocations.put(key, record);
      void this.#store.invocationsByTime.put([at, key[0], key[1]], null);
    });
    return answer;
  }
}
