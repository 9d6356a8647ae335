// The step attempts that are out (dispatched, not yet reported), one per run, under their fence. An
// attempt can be withdrawn: once its run no longer waits for it (cancelled, deleted by a sandbox
// reset, or moved on under another fence), or its sandbox run's org lost the sandbox, its signal aborts, and a custom action's call still
// waiting in the hook-runner for a guest slot is dropped there unrun. The signal is made only when a
// step asks for it (AbortController costs microseconds: a webhook step asks only when its request
// has to wait for a connection, or its input for memory, and is then dropped from that queue at once).
// Each attempt also knows whether its effect may have gone out (goingOut): at a clean stop, those
// that never did are recorded as not sent (boot-record.ts), and none of them may go out after that.

import type { PersistedRun } from '../../actors/run-transition.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';

/** One attempt out: its fence, and the controller made for the first step that asked for a signal. */
export interface AttemptOut {
  readonly fence: number;
  /** Aborted when the run leaves the attempt. */
  signal(): AbortSignal;
  /**
   * Its effect is about to go out (a webhook's request written, a custom action's call made): from
   * now on it may have reached its target. False when it must not go out (a clean stop has counted
   * it as never sent, sealUnsent): the caller drops it unsent.
   */
  goingOut(): boolean;
}

/**
 * The reason every withdrawn attempt's signal aborts with (nothing reads it but as "withdrawn"):
 * one made here, since abort() without a reason makes a DOMException, stack trace and all, for
 * each (most runs' attempts are withdrawn as they end, their request having waited for a socket).
 */
const WITHDRAWN = new DOMException('the run no longer waits for this attempt', 'AbortError');

class Attempt implements AttemptOut {
  readonly fence: number;
  /** The org of a sandbox run's attempt (withdrawn when the org's plan loses its sandbox); undefined for production. */
  readonly sandboxOf: string | undefined;
  /** goingOut() was called, or an attempt of the run under the same fence may have gone out before it. */
  mayHaveGoneOut: boolean;
  /** Asked before an attempt not yet out goes out: false once the attempts are sealed; notes it for its run otherwise. */
  readonly #mayGoOut: (attempt: Attempt) => boolean;
  #controller: AbortController | undefined;
  #withdrawn = false;

  constructor(fence: number, sandboxOf: string | undefined, mayHaveGoneOut: boolean, mayGoOut: (attempt: Attempt) => boolean) {
    this.fence = fence;
    this.sandboxOf = sandboxOf;
    this.mayHaveGoneOut = mayHaveGoneOut;
    this.#mayGoOut = mayGoOut;
  }

  /** Whether the run has left it (withdraw). */
  get withdrawn(): boolean {
    return this.#withdrawn;
  }

  goingOut(): boolean {
    if (this.mayHaveGoneOut) return true;
    if (!this.#mayGoOut(this)) return false;
    this.mayHaveGoneOut = true;
    return true;
  }

  signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#withdrawn) this.#controller.abort(WITHDRAWN);
    }
    return this.#controller.signal;
  }

  withdraw(): void {
    this.#withdrawn = true;
    this.#controller?.abort(WITHDRAWN);
  }
}

/** Keyed by the run's org-scoped key. */
export class AttemptsOut {
  readonly #out = new Map<string, Attempt>();
  /**
   * Per run, the fence of an attempt that may have gone out, until the run moves on from it
   * (withdrawIfLeft): a run picked up again after a stall is sent again under the same fence, and
   * that attempt must not read as never sent though its first one went out.
   */
  readonly #wentOut = new Map<string, number>();
  /** sealUnsent() was called: no attempt that had not gone out by then goes out. */
  #sealed = false;

  /** The fence of the run's attempt out, if any. */
  fenceOf(key: string): number | undefined {
    return this.#out.get(key)?.fence;
  }

  /** Marks the attempt under `fence` as out (replacing any older one of the run); `sandboxOf`: the org, for a sandbox run's. */
  start(key: string, fence: number, sandboxOf?: string): AttemptOut {
    const attempt = new Attempt(fence, sandboxOf, this.#wentOut.get(key) === fence, (going) => {
      if (this.#sealed) return false;
      // Noted only while it is the run's attempt and wanted: a run that left it is not sent again under its fence.
      if (this.#out.get(key) === going && !going.withdrawn) this.#wentOut.set(key, fence);
      return true;
    });
    this.#out.set(key, attempt);
    return attempt;
  }

  /** The attempt has reported (or failed to): forgotten, unless the run's next attempt is already out under another fence. */
  finish(key: string, attempt: AttemptOut): void {
    if (this.#out.get(key) === attempt) this.#out.delete(key);
  }

  /** Withdraws the attempts out of all the org's runs (it was deleted). */
  withdrawOrg(orgId: string): void {
    const prefix = orgScopedKey(orgId, '');
    for (const key of this.#wentOut.keys()) if (key.startsWith(prefix)) this.#wentOut.delete(key);
    for (const [key, attempt] of this.#out) if (key.startsWith(prefix)) attempt.withdraw();
  }

  /** Withdraws the attempts out of the org's sandbox runs (its plan lost the sandbox; the runs fail as sandbox_disabled). */
  withdrawSandboxOf(orgId: string): void {
    for (const attempt of this.#out.values()) if (attempt.sandboxOf === orgId) attempt.withdraw();
  }

  /** Withdraws the run's attempt out unless `run` (its new durable state; undefined: deleted) still waits for it. */
  withdrawIfLeft(key: string, run: PersistedRun | undefined): void {
    const stays = run !== undefined && run.value === 'running';
    if (!stays || run.context.fence !== this.#wentOut.get(key)) this.#wentOut.delete(key);
    const attempt = this.#out.get(key);
    if (attempt === undefined) return;
    if (run !== undefined && run.value === 'running' && run.context.fence === attempt.fence) return;
    attempt.withdraw();
  }

  /**
   * The attempts out whose effect never went out (still waiting for memory, a connection or the
   * first-effect record), as [run key, fence]; from now on none of them goes out (goingOut answers
   * false). Called once, at a clean stop, after the run engine has closed.
   */
  sealUnsent(): Array<readonly [key: string, fence: number]> {
    this.#sealed = true;
    return this.neverSent();
  }

  /** The attempts out whose effect never went out, as [run key, fence]. */
  neverSent(): Array<readonly [key: string, fence: number]> {
    const unsent: Array<readonly [string, number]> = [];
    for (const [key, attempt] of this.#out) if (!attempt.mayHaveGoneOut) unsent.push([key, attempt.fence]);
    return unsent;
  }
}
