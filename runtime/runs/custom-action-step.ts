// Performs one attempt of a custom_action step: resolves the APPROVED version, invokes it on the
// hook-runner with the step key and fence, and checks the output contract. Never throws.

import { REJECTION_HINT, trapHint } from '../actions/guest-failure-hint.ts';
import type { JsonValue } from '../../actors/json.ts';
import type { RunContext, StepFailure } from '../../actors/run-types.ts';
import { claimedSinceResume } from '../../actors/run-progress.ts';
import { OutputContractError, parseActionOutput, type DerivedEventSpec, type ProjectionWrite } from '../actions/output-contract.ts';
import { RetryableError, SluiceError } from '../errors.ts';
import { CallNotSentError, CallWithdrawnError, RunnerUnavailableError } from '../hook-runner/runner-errors.ts';
import type { ActionInvoker } from '../hook-runner/client.ts';

/** Derived events deeper than this fail the step: a hook cannot loop an event forever. */
export const MAX_DERIVED_DEPTH = 8;
/** Events that custom actions may derive, in all, from one root event (all sharing its correlation_id). */
export const MAX_DERIVED_PER_ROOT = 1000;
/** How a step whose output would derive one event too many fails. */
export const DERIVED_BUDGET_EXCEEDED: StepFailure = {
  code: 'derived_event_budget_exceeded',
  message: `${MAX_DERIVED_PER_ROOT} events have already been derived from this run's root event; no more are made.`,
  retryable: false,
};

type Resolution =
  | { kind: 'approved'; version: number; digest: string; permissions: readonly string[] }
  | { kind: 'missing' }
  | { kind: 'not_approved'; status: string }
  | { kind: 'revoked'; version: number };

/** What the run engine needs of custom actions (implemented by the custom action store). */
export interface ActionResolver {
  resolveForRun(orgId: string, actionId: string): Resolution;
  resolveVersion(orgId: string, actionId: string, version: number): Resolution;
}

/**
 * The version of `actionId` this run already ran since it was created or last resumed, if any: its
 * later steps and retries keep it, so one run never mixes code and permissions approved apart. A
 * resume picks the approved version afresh (a fixed one, say). Only an attempt the hook-runner
 * answered ran a version (its evidence has `replayed`, from the reply): one that never reached the
 * runner, or lost its call, names the version it would have run, and its retry takes the version
 * approved then.
 */
export function pinnedActionVersion(ctx: RunContext, actionId: string): number | undefined {
  for (const step of ctx.steps) {
    for (const attempt of step.attempts) {
      if (!claimedSinceResume(ctx, attempt) || attempt.evidence === null || typeof attempt.evidence !== 'object' || Array.isArray(attempt.evidence)) continue;
      const evidence = attempt.evidence as { readonly [key: string]: JsonValue };
      if (evidence['action_id'] === actionId && typeof evidence['version'] === 'number' && typeof evidence['replayed'] === 'boolean') return evidence['version'];
    }
  }
  return undefined;
}

export interface ActionEffects {
  readonly projection: ProjectionWrite | null;
  readonly derivedEvent: DerivedEventSpec | null;
}

/** `invoked`: the call went to the hook-runner (false: refused before, e.g. not approved, no runner). */
export type ActionStepOutcome =
  | { readonly ok: true; readonly result: JsonValue; readonly evidence: JsonValue; readonly effects: ActionEffects; readonly invoked: true }
  | { readonly ok: false; readonly error: StepFailure; readonly evidence: JsonValue | null; readonly invoked: boolean };

export interface ActionStepInput {
  readonly orgId: string;
  readonly actionId: string;
  /** The triggering event's payload as received (payload-text.ts). */
  readonly payloadJson: string;
  /** The version this run already ran (pinnedActionVersion), if any. */
  readonly pinnedVersion: number | undefined;
  readonly eventDepth: number;
  /** Takes a place in the root event's derived-event budget when the output derives one; false when it is used up (derived-budget.ts). */
  readonly takeDerived: () => boolean;
  /** The org's projection row cap when the row the output writes would pass it (ProjectionStore.hasRoomFor), else undefined. */
  readonly rowLimitReached?: (projection: ProjectionWrite) => number | undefined;
  readonly idempotencyKey: string;
  readonly fence: number;
  /**
   * Whether the run still waits for this attempt, asked just before the call goes to the hook-runner:
   * a run cancelled while the step waited (for memory: step-input.ts) does not run its guest.
   */
  readonly stillWanted?: () => boolean;
  /** Aborted when the run leaves this attempt while its call is out: a call still queued in the hook-runner is dropped unrun. */
  readonly withdrawn?: AbortSignal;
}

/**
 * A failure; with evidence the call had gone to the hook-runner (unless `invoked` says it never got
 * there: no connection), without it it was refused before.
 */
const fail = (code: string, message: string, retryable: boolean, evidence: JsonValue | null = null, invoked = evidence !== null): ActionStepOutcome => ({
  ok: false,
  error: { code, message, retryable },
  evidence,
  invoked,
});

/**
 * `runner` is the hook-runner client, or in the runtime one that first gives the runner back a module
 * it lost (actions/module-restore.ts), within this attempt.
 */
export async function runCustomAction(input: ActionStepInput, actions: ActionResolver | undefined, runner: ActionInvoker | undefined): Promise<ActionStepOutcome> {
  const resolved = (input.pinnedVersion === undefined ? actions?.resolveForRun(input.orgId, input.actionId) : actions?.resolveVersion(input.orgId, input.actionId, input.pinnedVersion)) ?? { kind: 'missing' as const };
  if (resolved.kind === 'missing') return fail('custom_action_not_found', `Custom action "${input.actionId}" does not exist in this organization.`, false);
  if (resolved.kind === 'not_approved') {
    // Only a version waiting for review can be approved: after a revocation or a rejection it takes a new one.
    const remedy = resolved.status === 'pending_review' ? 'an admin must approve it' : 'upload a new version (POST …/custom-actions/:id/versions) and have an admin approve it';
    return fail('custom_action_not_approved', `Custom action "${input.actionId}" has no approved version (latest is ${resolved.status}); ${remedy}.`, false);
  }
  if (resolved.kind === 'revoked') {
    return fail('custom_action_revoked', `Version ${resolved.version} of custom action "${input.actionId}", which this run uses, was revoked; approve a version, then resume the run to use it.`, false);
  }
  const base = { action_id: input.actionId, version: resolved.version, digest: resolved.digest, idempotency_key: input.idempotencyKey };
  // Found and approved: the evidence names the call, as one an unreachable runner refused does.
  if (runner === undefined) return fail('hook_runner_unavailable', 'No hook-runner is configured (start with sluice dev or --runner).', true, base, false);
  if (input.stillWanted?.() === false) {
    return fail('custom_action_withdrawn', 'Not run: the run left this attempt (cancelled or deleted) while the step waited to start.', false, base, false);
  }
  let reply;
  try {
    reply = await runner.invoke({
      orgId: input.orgId,
      actionId: input.actionId,
      digest: resolved.digest,
      permissions: resolved.permissions,
      payloadJson: input.payloadJson,
      idempotencyKey: input.idempotencyKey,
      fence: input.fence,
      ...(input.withdrawn === undefined ? {} : { signal: input.withdrawn }),
    });
  } catch (error) {
    // The run left the attempt while the call was out: dropped by the runner if its guest had not started.
    if (error instanceof CallWithdrawnError) return fail('custom_action_withdrawn', error.message, false, base, error.mayHaveRun);
    // No connection took the call, or the runtime held it back: the attempt never started (no started_at), as a refused webhook's.
    // A runner's retryAfterMs (5 s below its disk floor) is for API callers; a step keeps its policy's
    // backoff, so that a disk low for minutes does not use up the step's retries in 25 s.
    if ((error instanceof RunnerUnavailableError && !error.mayHaveRun) || error instanceof CallNotSentError) return fail(error.code, error.message, true, base, false);
    // A runner token the runner refuses is a deployment fault that clears once fixed: nothing ran, so the step retries (its policy's budget, as for an unavailable runner).
    if (error instanceof SluiceError && error.code === 'hook_runner_unauthenticated') return fail(error.code, error.message, true, base, false);
    if (error instanceof RetryableError) return fail(error.code, error.message, true, base);
    if (error instanceof SluiceError) return fail(error.code, error.message, false, base);
    return fail('hook_runner_error', error instanceof Error ? error.message : String(error), true, base);
  }
  const evidence = { ...base, fuel_used: reply.fuelUsed, replayed: reply.replayed };
  const outcome = reply.outcome;
  if (outcome.kind === 'trap') return fail(`action_trap_${outcome.trap}`, `The action trapped (${outcome.trap}): ${outcome.message}${trapHint(outcome.trap)}`, false, evidence);
  if (outcome.kind === 'rejected') return fail('action_rejected_payload', `The action rejected the payload${outcome.reason === '' ? '' : ` (${outcome.reason})`}: ${REJECTION_HINT}.`, false, evidence);
  try {
    const parsed = parseActionOutput(outcome.outputJson);
    if (parsed.derivedEvent !== null && input.eventDepth + 1 > MAX_DERIVED_DEPTH) {
      return fail('derived_event_depth_exceeded', `A derived event would be ${input.eventDepth + 1} levels deep; the limit is ${MAX_DERIVED_DEPTH}.`, false, evidence);
    }
    const rowLimit = parsed.projection === null ? undefined : input.rowLimitReached?.(parsed.projection);
    if (rowLimit !== undefined) {
      return fail(
        'projection_row_limit_reached',
        `The organization has reached its limit of ${rowLimit.toLocaleString('en-US')} projection rows, and this output would add one; delete rows it no longer needs (DELETE /organizations/:org/projections/:name, or one row of it), then resume the run.`,
        false,
        evidence,
      );
    }
    // Depth bounds a chain, not its width: workflows that each derive two events of their own
    // trigger would double every level. One root event's descendants share this budget.
    if (parsed.derivedEvent !== null && !input.takeDerived()) {
      const { code, message, retryable } = DERIVED_BUDGET_EXCEEDED;
      return fail(code, message, retryable, evidence);
    }
    return { ok: true, result: parsed.document, evidence, effects: { projection: parsed.projection, derivedEvent: parsed.derivedEvent }, invoked: true };
  } catch (error) {
    if (error instanceof OutputContractError) return fail('invalid_action_output', `${error.field}: ${error.message}`, false, evidence);
    throw error;
  }
}
