// What `sluice explain` prints: an event (where it came from, the runs it started, its replays) or a
// run (each step and attempt: what went out, what came back, with the idempotency key) as a few
// lines a person on support can read, ending with what they can do next. Pure: the views come
// from the REST client.

import type { EventDetails, Run, RunAttempt, RunStep, SluiceEvent } from '../kits/client/index.ts';

/** Where an event came from, in words. */
function originOf(event: SluiceEvent): string {
  const { source } = event;
  if (source === '@api') return `sent through the API${event.provider_event_id === null ? '' : ` (id chosen by the sender)`}`;
  if (source === '@schedule') return 'a schedule tick';
  if (source.startsWith('@device:')) return `from device "${source.slice('@device:'.length)}"`;
  if (source === '@replay') {
    const limited = event.replay_workflow_ids === null ? 'every workflow listening' : `only workflows ${event.replay_workflow_ids.join(', ')}`;
    return `a business replay of event ${event.causation_id ?? '?'} (side_effects ${event.replay_skip_side_effects ? 'skip' : 'run'}; ${limited})`;
  }
  if (source === '@derived') return `derived by run ${event.causation_id ?? '?'} (depth ${event.depth}, chain ${event.correlation_id})`;
  return `a webhook to source "${source}"${event.provider_event_id === null ? '' : ` (delivery ${event.provider_event_id})`}`;
}

/** A run's failure in one line. */
const failureOf = (error: NonNullable<Run['error']>): string =>
  `${error.code} at step "${error.step_id}" (${error.reason === 'non_retryable' ? 'not retried' : 'retries used up'}): ${error.message}`;

export function explainEvent(details: EventDetails): string {
  const { event, recording, reactions, replays } = details;
  const lines = [`event ${event.id} (${event.type}, ${event.environment})`, `  received ${event.received_at}: ${originOf(event)}`];
  if (event.replay_skip_side_effects && event.source !== '@replay') lines.push('  its runs record webhook steps as skipped (it comes from a skip replay)');
  if (recording !== null) {
    const verified = recording.verifier === null ? 'not signed' : `verified by ${recording.verifier.scheme}, key #${recording.verifier.key_index}`;
    lines.push(`  request: ${recording.method} ${recording.path}, ${recording.body_bytes} bytes${recording.body_truncated ? ' (recording cut)' : ''}, ${verified}`);
  }
  lines.push(reactions.length === 0 ? '  runs: none (no enabled workflow listened for it)' : `  runs (${reactions.length}):`);
  for (const run of reactions) {
    lines.push(`    ${run.run_id}  workflow ${run.workflow_id} v${run.workflow_version}  ${run.state}${run.error === null ? '' : `: ${failureOf(run.error)}`}`);
  }
  if (replays.length > 0) {
    lines.push(`  replays (${replays.length === 20 ? 'the newest 20' : replays.length}, newest first):`);
    for (const replay of replays) {
      lines.push(`    ${replay.event_id}  ${replay.received_at}  side_effects ${replay.side_effects}${replay.workflow_ids === null ? '' : `, workflows ${replay.workflow_ids.join(', ')}`}`);
    }
  }
  if (reactions.length > 0) lines.push(`  next: sluice explain ... --run <run id> shows a run's steps; sluice replay ... --event ${event.id} makes a new event from this one`);
  return lines.join('\n');
}

/** The evidence's own fields, when it is an object. */
const fieldsOf = (evidence: unknown): Readonly<Record<string, unknown>> =>
  evidence !== null && typeof evidence === 'object' && !Array.isArray(evidence) ? (evidence as Record<string, unknown>) : {};

/** A receiver's answer body as one short line. */
const snippet = (body: unknown): string => {
  if (typeof body !== 'string' || body === '') return '';
  const quoted = JSON.stringify(body.length > 120 ? `${body.slice(0, 120)}…` : body);
  return ` ${quoted}`;
};

/** One attempt in one line: its outcome, what went out and what came back. */
function attemptLine(attempt: RunAttempt): string {
  const evidence = fieldsOf(attempt.evidence);
  const parts = [`attempt ${attempt.attempt} (fence ${attempt.fence}): ${attempt.outcome}${attempt.error === null ? '' : ` ${attempt.error.code}`}`];
  const url = typeof evidence['url'] === 'string' ? evidence['url'] : undefined;
  if (attempt.started_at === null) parts.push(url === undefined ? 'nothing sent' : `nothing sent to ${url}`);
  else parts.push(`sent ${attempt.started_at}`, ...(url === undefined ? [] : [`POST ${url}${typeof evidence['status'] === 'number' ? ` → ${evidence['status']}${snippet(evidence['body'])}` : ''}`]));
  if (typeof evidence['action_id'] === 'string') parts.push(`action ${evidence['action_id']} v${String(evidence['version'])}${typeof evidence['fuel_used'] === 'number' ? `, fuel ${evidence['fuel_used']}` : ''}${evidence['replayed'] === true ? ', answer replayed by the hook-runner' : ''}`);
  if (typeof evidence['duration_ms'] === 'number') parts.push(`${evidence['duration_ms']} ms`);
  if (typeof evidence['queued_ms'] === 'number') parts.push(`waited ${evidence['queued_ms']} ms for a connection`);
  if (typeof evidence['idempotency_key'] === 'string') parts.push(`key ${evidence['idempotency_key']}`);
  if (evidence['effect_sent'] === 'unknown') parts.push('whether it reached its target is unknown');
  let line = parts.join('; ');
  if (attempt.error !== null) line += `\n        ${attempt.error.message}`;
  if (attempt.after_cancel !== null) line += `\n        after the cancel: ${attempt.after_cancel.outcome} at ${attempt.after_cancel.at}${attempt.after_cancel.error === null ? '' : ` (${attempt.after_cancel.error.code})`}`;
  return line;
}

function stepLines(step: RunStep): string[] {
  const lines = [`  step ${step.index + 1} "${step.id}" (${step.type}): ${step.status}`];
  if (step.earlier_attempts_dropped > 0) lines.push(`      (${step.earlier_attempts_dropped} earlier attempts no longer kept)`);
  for (const attempt of step.attempts) lines.push(`      ${attemptLine(attempt)}`);
  return lines;
}

export function explainRun(run: Run): string {
  const lines = [`run ${run.run_id} (workflow ${run.workflow_id} v${run.workflow_version}, ${run.environment}): ${run.state}`, `  event ${run.event_id}; created ${run.created_at}, updated ${run.updated_at}`];
  if (run.error !== null) lines.push(`  failed: ${failureOf(run.error)}`);
  if (run.cancel_reason !== null) lines.push(`  cancelled: ${run.cancel_reason}`);
  if (run.skip_side_effects) lines.push('  webhook steps are recorded as skipped, not sent (its event is a skip replay, or derived from one)');
  if (run.resumes.length > 0) lines.push(`  resumed ${run.resumes.length} time${run.resumes.length === 1 ? '' : 's'}, last at ${run.resumes.at(-1)!.at}`);
  if (run.retry_at !== null) lines.push(`  next attempt at ${run.retry_at}`);
  if (run.wake_at !== null) lines.push(`  waiting until ${run.wake_at}`);
  for (const step of run.steps) lines.push(...stepLines(step));
  if (run.state === 'failed') {
    const from = run.error === null ? '' : ` from step "${run.error.step_id}" (steps already completed are not run again; it keeps its idempotency keys)`;
    lines.push(`  next: POST /organizations/${run.org_id}/runs/${run.run_id}/resume continues it${from}`);
  }
  return lines.join('\n');
}
