// The step attempts that are out (dispatched, not yet reported), one per run, under their fence. An
// attempt can be withdrawn: once its run no longer waits for it (cancelled, deleted by a sandbox
// reset, or moved on under another fence), or its sandbox run's org lost the sandbox, its signal aborts, and a custom action's call still
// waiting in the hook-runner for a guest slot is dropped there unrun. The signal is made only when a
// step asks for it (AbortController costs microseconds: a webhook step asks only when its request
// has to wait for a connection, or its input for memory, and is then dropped from that queue at once).

import type { PersistedRun } from '../../actors/run-transition.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';

/** One attempt out: its fence, and the controller made for the first step that asked for a signal. */
export interface AttemptOut {
  readonly fence: number;
  /** Aborted when the run leaves the attempt. */
  signal(): AbortSignal;
}

class Attempt implements AttemptOut {
  readonly fence: number;
  /** The org of a sandbox run's attempt (withdrawn when the org's plan loses its sandbox); undefined for production. */
  readonly sandboxOf: string | undefined;
  #controller: AbortController | undefined;
  #withdrawn = false;

  constructor(fence: number, sandboxOf: string | undefined) {
    this.fence = fence;
    this.sandboxOf = sandboxOf;
  }

  signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#withdrawn) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  withdraw(): void {
    this.#withdrawn = true;
    this.#controller?.abort();
  }
}

/** Keyed by the run's org-scoped key. */
export class AttemptsOut {
  readonly #out = new Map<string, Attempt>();

  /** The fence of the run's attempt out, if any. */
  fenceOf(key: string): number | undefined {
    return this.#out.get(key)?.fence;
  }

  /** Marks the attempt under `fence` as out (replacing any older one of the run); `sandboxOf`: the org, for a sandbox run's. */
  start(key: string, fence: number, sandboxOf?: string): AttemptOut {
    const attempt = new Attempt(fence, sandboxOf);
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
    for (const [key, attempt] of this.#out) if (key.startsWith(prefix)) attempt.withdraw();
  }

  /** Withdraws the attempts out of the org's sandbox runs (its plan lost the sandbox; the runs fail as sandbox_disabled). */
  withdrawSandboxOf(orgId: string): void {
    for (const attempt of this.#out.values()) if (attempt.sandboxOf === orgId) attempt.withdraw();
  }

  /** Withdraws the run's attempt out unless `run` (its new durable state; undefined: deleted) still waits for it. */
  withdrawIfLeft(key: string, run: PersistedRun | undefined): void {
    const attempt = this.#out.get(key);
    if (attempt === undefined) return;
    if (run !== undefined && run.value === 'running' && run.context.fence === attempt.fence) return;
    attempt.withdraw();
  }
}
