// The JSON the REST API answers, as the client sees it: events (runtime/events/event-record.ts),
// their request recordings, run summaries (runtime/runs/run-summary.ts) and runs (actors/run-view.ts). Every field the server
// writes is declared; test/kits/client-types.test.ts checks them against a real runtime's answers.

export type Environment = 'production' | 'sandbox';

export interface SluiceEvent {
  readonly id: string;
  readonly org_id: string;
  readonly type: string;
  /** As it was received, byte for byte where JSON allows (the server passes its text on). */
  readonly payload: unknown;
  readonly environment: Environment;
  /** The source name for a webhook; `@api`, `@schedule`, `@device:<name>`, ... for a trigger. */
  readonly source: string;
  /** The sender's own id (sendEvent's `id`, a provider's delivery id, a device message id), else null. */
  readonly provider_event_id: string | null;
  /** ISO 8601, the same instant as `received_at_ms`. */
  readonly received_at: string;
  readonly received_at_ms: number;
  /** The root event of its chain: its own id for an event a trigger received or a replay. */
  readonly correlation_id: string;
  /** What made it: the run that derived it, or the event a replay copies; null for a received event. */
  readonly causation_id: string | null;
  /** 0 for a received event or a replay, one more per derivation. */
  readonly depth: number;
  /** A replay made with `side_effects: "skip"`: its webhook steps are recorded as skipped. */
  readonly replay_skip_side_effects: boolean;
  /** A replay limited to these workflows (`workflowIds`); null: every workflow listening. */
  readonly replay_workflow_ids: readonly string[] | null;
}

/** Bounded evidence of the request that created an event (a webhook); secrets and signatures redacted. */
export interface EventRecording {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly body_bytes: number;
  readonly body_truncated: boolean;
  readonly verifier: { readonly scheme: string; readonly key_index: number } | null;
  readonly received_at: string;
}

/** Why a failed run failed: a step's error that is never retried, or its last attempt. */
export type RunFailureReason = 'non_retryable' | 'retries_exhausted';

/** The short form of a run, as run lists and an event's reactions give it. */
export interface RunSummary {
  readonly run_id: string;
  readonly workflow_id: string;
  /** The workflow version the run started on (it keeps it to the end). */
  readonly workflow_version: number;
  readonly event_id: string;
  readonly environment: Environment;
  readonly state: string;
  /** Set once the run failed. */
  readonly error: { readonly code: string; readonly message: string; readonly step_id: string; readonly reason: RunFailureReason } | null;
  /** ISO 8601. */
  readonly created_at: string;
  readonly updated_at: string;
}

/** One business replay of an event, as the event's view lists them (newest first, at most 20). */
export interface EventReplay {
  /** The replay's own event: its runs are on its view. */
  readonly event_id: string;
  readonly received_at: string;
  readonly received_at_ms: number;
  readonly side_effects: 'skip' | 'run';
  readonly workflow_ids: readonly string[] | null;
}

/** GET /events/:id: the event, the request that created it (null for one that came another way), the runs it started and its replays. */
export interface EventDetails {
  readonly event: SluiceEvent;
  readonly recording: EventRecording | null;
  readonly reactions: RunSummary[];
  readonly replays: EventReplay[];
}

/** GET /failed-events: an event with failed runs (at most 20 of them listed; `failed_runs` counts all). */
export interface FailedEvent {
  /** Only its id when the event itself is no longer kept. */
  readonly event: SluiceEvent | { readonly id: string };
  readonly runs: RunSummary[];
  readonly failed_runs: number;
}

/** What a business replay answers: its new event and the runs that event started. */
export interface ReplayMade {
  readonly event: SluiceEvent;
  readonly reactions: RunSummary[];
  /** Present when an earlier request with the same Idempotency-Key made this replay: nothing new was made. */
  readonly idempotent_replayed?: true;
}

/** A step attempt's error (a run's failure names the step it came from instead). */
export interface AttemptError {
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly retry_after_ms: number | null;
}

/** One try of a step. Times are ISO 8601, null when they have not happened. */
export interface RunAttempt {
  /** 1-based, counting every claim of the step. */
  readonly attempt: number;
  readonly fence: number;
  readonly claimed_at: string;
  /**
   * When it went out (a connection, a hook-runner call; a delay: when it began), once it reported;
   * null while a webhook or custom action attempt is under way, when nothing was sent, and for one
   * cancelled or cut off while out (then `after_cancel`, or evidence `effect_sent: "unknown"`, says more).
   */
  readonly started_at: string | null;
  readonly ended_at: string | null;
  readonly outcome: 'pending' | 'succeeded' | 'failed' | 'skipped' | 'abandoned' | 'cancelled';
  readonly error: AttemptError | null;
  /** What was sent and answered (webhook: url, status, body; custom action: version, fuel), with the idempotency key. */
  readonly evidence: unknown;
  /** A cancelled attempt that was already out: what it did after the cancel. */
  readonly after_cancel: {
    readonly outcome: 'succeeded' | 'failed' | 'skipped';
    readonly at: string;
    readonly started_at: string | null;
    readonly error: AttemptError | null;
    readonly evidence: unknown;
  } | null;
}

export interface RunStep {
  readonly id: string;
  readonly index: number;
  readonly type: 'webhook' | 'custom_action' | 'delay';
  readonly status: 'pending' | 'active' | 'retrying' | 'succeeded' | 'skipped' | 'failed' | 'cancelled';
  readonly result: unknown;
  readonly attempts: RunAttempt[];
  /** Earlier attempts no longer kept (a resume keeps a step's latest 25). */
  readonly earlier_attempts_dropped: number;
}

/** GET /runs/:id: a run with every step and attempt. */
export interface Run {
  readonly run_id: string;
  readonly org_id: string;
  readonly event_id: string;
  readonly workflow_id: string;
  readonly workflow_version: number;
  readonly environment: Environment;
  readonly state: string;
  /** Its event is a `side_effects: "skip"` replay (or derived from one): webhook steps are recorded as skipped. */
  readonly skip_side_effects: boolean;
  readonly current_step: { readonly id: string; readonly index: number; readonly type: RunStep['type'] } | null;
  readonly fence: number;
  readonly retry_at: string | null;
  readonly wake_at: string | null;
  readonly error: RunSummary['error'];
  readonly cancel_reason: string | null;
  /** Each time a person resumed it (the latest 20), with the error it had failed with. */
  readonly resumes: ReadonlyArray<{ readonly at: string; readonly error: RunSummary['error'] }>;
  readonly created_at: string;
  readonly updated_at: string;
  readonly steps: RunStep[];
}
