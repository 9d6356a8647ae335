// Backpressure on an org's run queue, one per environment (org-admission.ts). While an org has `max`
// runs of an environment waiting for one of its concurrency slots (max_concurrent_runs), its new
// events of that environment from outside (webhooks, API events, replays, device messages) are
// refused with 429 run_backlog_full and a Retry-After, nothing stored: one org flooding events at
// workflows that cannot keep up (a receiver that never answers, a hundred workflows on one type)
// holds a bounded queue in memory and on disk, not one that grows until both run out for every
// org. Events Sluice makes itself (schedule ticks, device connection events, derived events) are
// not refused: each has its own bound (one per tick, per connection, the derived-event budget).
// Writes in flight together are checked against the same count, so the queue may pass `max` by the
// runs they start.

import type { Environment } from '../../actors/run-types.ts';
import { SluiceError } from '../errors.ts';

/** Runs an org may have waiting for a slot before its new events are refused (--max-queued-runs). */
export const DEFAULT_MAX_QUEUED_RUNS = 100_000;

/** How long a refused sender is told to wait: a queue this long takes a while to drain. */
const RETRY_AFTER_MS = 5000;

export class RunBacklogFullError extends SluiceError {
  readonly retryAfterMs = RETRY_AFTER_MS;

  constructor(max: number, environment: Environment) {
    super(429, 'run_backlog_full', `This organization has reached its cap of ${max.toLocaleString('en-US')} ${environment} runs waiting for a concurrency slot (its max_concurrent_runs are busy); new ${environment} events are refused until they drain: retry after ${RETRY_AFTER_MS / 1000} s.`);
  }
}

export class RunBacklog {
  readonly #queued: (orgId: string, environment: Environment) => number;

  /** `queued` counts the org's runs in an environment waiting for a slot, those whose write is in flight included. */
  constructor(
    readonly max: number,
    queued: (orgId: string, environment: Environment) => number,
  ) {
    this.#queued = queued;
  }

  /** The refusal for a new event of the org in `environment`, or undefined when that queue has room. */
  refusal(orgId: string, environment: Environment): RunBacklogFullError | undefined {
    return this.#queued(orgId, environment) >= this.max ? new RunBacklogFullError(this.max, environment) : undefined;
  }
}
