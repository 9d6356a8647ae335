// What `sluice explain` (and the triage commands) print: an event (where it came from, the runs it
// started, its replays), a run (each step and attempt: what went out, what came back, with the
// idempotency key) or the failed events, as lines a person on support can read, ending with what
// they can do next. Pure: the views come from the REST client. Every line goes through
// printable(): receivers and actions choose some of this text, and it must not drive the terminal.

import type { EventDetails, FailedEvent, Run, RunAttempt, RunStep, RunSummary, SluiceEvent } from '../kits/client/index.ts';
import { printableLines } from './terminal-text.ts';
import { CONNECTION_EVENT_TYPES } from './triggers/device-record.ts';

/** ` --environment sandbox` for a sandbox item (production is every command's default). */
const environmentFlag = (environment: string): string => (environment === 'production' ? '' : ` --environment ${environment}`);

/** A field of an object payload, when it is a string. */
const payloadString = (payload: unknown, field: string): string | undefined => {
  const value = payload !== null && typeof payload === 'object' ? (payload as Record<string, unknown>)[field] : undefined;
  return typeof value === 'string' ? value : undefined;
};

/** Where an event came from, in words. */
function originOf(event: SluiceEvent): string {
  const { source } = event;
  if (source === '@api') return `sent through the API${event.provider_event_id === null ? '' : ' (id chosen by the sender)'}`;
  if (source === '@schedule') {
    const schedule = payloadString(event.payload, 'schedule');
    const due = payloadString(event.payload, 'scheduled_for');
    return `a tick of schedule ${schedule === undefined ? '?' : `"${schedule}"`}${due === undefined ? '' : ` due ${due}`}`;
  }
  if (source.startsWith('@device:')) return `from device "${source.slice('@device:'.length)}"`;
  if (source === '@replay') {
    const limited = event.replay_workflow_ids === null ? 'every workflow listening' : `only workflows ${event.replay_workflow_ids.join(', ')}`;
    return `a business replay of event ${event.causation_id ?? '?'} (side_effects ${event.replay_skip_side_effects ? 'skip' : 'run'}; ${limited})`;
  }
  if (source === '@derived') return `derived by run ${event.causation_id ?? '?'} (depth ${event.depth}, chain ${event.correlation_id})`;
  return `a webhook to source "${source}"${event.provider_event_id === null ? '' : ` (delivery ${event.provider_event_id})`}`;
}

/** Why the failure was not retried, in a few words (its attempts cut off by crashes used no retries: its reason says retries_exhausted all the same). */
const notRetriedBecause = (error: NonNullable<Run['error']>): string =>
  error.code === 'step_interrupted_repeatedly' ? 'cut off by crashes, not sent again on its own' : error.reason === 'non_retryable' ? 'not retried' : 'retries used up';

/** A run's failure in one line. */
const failureOf = (error: NonNullable<Run['error']>): string => `${error.code} at step "${error.step_id}" (${notRetriedBecause(error)}): ${error.message}`;

/** One run of a list (an event's runs, a replay's, the failed ones): id, workflow and version, state, and why it failed. */
export const runLine = (run: RunSummary): string =>
  `${run.run_id}  workflow ${run.workflow_id} v${run.workflow_version}  ${run.state}${run.error === null ? '' : run.state === 'failed' ? `: ${failureOf(run.error)}` : ` (it had failed: ${failureOf(run.error)})`}`;

export function explainEvent(details: EventDetails): string {
  const { event, recording, reactions } = details;
  // A Sluice from before replays were listed sends none.
  const replays = details.replays ?? [];
  const lines = [`event ${event.id} (${event.type}, ${event.environment})`, `  received ${event.received_at}: ${originOf(event)}`];
  if (event.replay_skip_side_effects && event.source !== '@replay') lines.push('  its runs record webhook steps as skipped (it comes from a skip replay)');
  if (recording !== null) {
    const verified = recording.verifier === null ? 'not signed' : `verified by ${recording.verifier.scheme}, key #${recording.verifier.key_index}`;
    lines.push(`  request: ${recording.method} ${recording.path}, ${recording.body_bytes} bytes${recording.body_truncated ? ' (recording cut)' : ''}, ${verified}`);
  }
  lines.push(reactions.length === 0 ? '  runs: none (no enabled workflow listened for it)' : `  runs (${reactions.length}):`);
  for (const run of reactions) {
    lines.push(`    ${runLine(run)}`);
  }
  if (replays.length > 0) {
    lines.push(`  replays (${replays.length === 20 ? 'the newest 20; there may be more' : replays.length}, newest first):`);
    for (const replay of replays) {
      lines.push(`    ${replay.event_id}  ${replay.received_at}  side_effects ${replay.side_effects}${replay.workflow_ids === null ? '' : `, workflows ${replay.workflow_ids.join(', ')}`}`);
    }
  }
  const flag = environmentFlag(event.environment);
  if (reactions.length > 0) {
    // Only Sluice says when a device connection opened or ended: such an event is never replayed.
    const redo = CONNECTION_EVENT_TYPES.has(event.type) ? `sluice resume ...${flag} --run <run id> retries a failed one` : `sluice replay ... --event ${event.id}${flag} --side-effects skip|run makes a new event from this one, with runs of the workflows listening now (skip: webhook steps recorded, not sent)`;
    lines.push(`  next: sluice explain ...${flag} --run <run id> shows a run's steps; ${redo}`);
  }
  return printableLines(lines);
}

/** The evidence's own fields, when it is an object. */
const fieldsOf = (evidence: unknown): Readonly<Record<string, unknown>> =>
  evidence !== null && typeof evidence === 'object' && !Array.isArray(evidence) ? (evidence as Record<string, unknown>) : {};

/** The first `length` UTF-16 units of `text`, not ending inside a surrogate pair. */
const cut = (text: string, length: number): string => (/[\ud800-\udbff]/.test(text.charAt(length - 1)) ? text.slice(0, length - 1) : text.slice(0, length));

/** A receiver's answer body as one short quoted piece. */
const snippet = (body: unknown): string => (typeof body !== 'string' || body === '' ? '' : ` ${JSON.stringify(body.length > 120 ? `${cut(body, 120)}…` : body)}`);

/** What of the answer's body was kept, when not all of it: one cut off by the timeout or a broken connection, or one past the 4 KiB kept. */
function bodyKept(evidence: Readonly<Record<string, unknown>>): string {
  if (evidence['body_cut_off'] === true) return ' (its body cut off: still arriving at the timeout, or its connection broke)';
  return evidence['body_truncated'] === true ? ' (its body past the first 4 KiB not kept)' : '';
}

/** What evidence says of the target and its answer: the request, the action, times, the key. */
function evidenceParts(evidenceValue: unknown, sent: boolean): string[] {
  const evidence = fieldsOf(evidenceValue);
  const parts: string[] = [];
  if (typeof evidence['url'] === 'string') {
    const answer = typeof evidence['status'] === 'number' ? ` → ${evidence['status']}${snippet(evidence['body'])}${bodyKept(evidence)}` : '';
    parts.push(sent ? `POST ${evidence['url']}${answer}` : `to ${evidence['url']}`);
  }
  if (typeof evidence['action_id'] === 'string') {
    const fuel = typeof evidence['fuel_used'] === 'number' ? `, fuel ${evidence['fuel_used']}` : '';
    parts.push(`action ${evidence['action_id']} v${String(evidence['version'])}${fuel}${evidence['replayed'] === true ? ', answer replayed by the hook-runner' : ''}`);
  }
  if (typeof evidence['duration_ms'] === 'number') parts.push(`${evidence['duration_ms']} ms`);
  if (typeof evidence['queued_ms'] === 'number') parts.push(`waited ${evidence['queued_ms']} ms for a connection`);
  if (typeof evidence['idempotency_key'] === 'string') parts.push(`key ${evidence['idempotency_key']}`);
  return parts;
}

/** How an attempt left open by the runtime's end reads, by the reason its evidence gives (run-progress.ts, RestartCause). */
const RESTART_WORDS: Readonly<Record<string, string>> = {
  runtime_restarted: 'the runtime went down while it was out',
  runtime_stopped: 'the runtime was stopped cleanly while it was out',
};

/**
 * Whether the attempt went out, in words: a delay sends nothing; a pending one is under way (it may
 * still wait for a connection); one the run left while it was out may have reached its target,
 * unless what it reported after the cancel says it never went (withdrawn while it waited).
 */
function sendingOf(attempt: RunAttempt, type: RunStep['type']): string {
  if (type === 'delay') {
    if (attempt.started_at === null) return 'waiting';
    return attempt.outcome === 'succeeded' && attempt.ended_at !== null ? `started ${attempt.started_at}, woke ${attempt.ended_at}` : `started ${attempt.started_at}`;
  }
  if (attempt.started_at !== null) {
    // Written as the receiver closed its kept-alive connection: most often it never read it (webhook-step.ts).
    const crossed = attempt.error?.code === 'webhook_connection_closed' ? ' (the receiver closed the connection as it went out: it may not have seen it)' : '';
    return `sent ${attempt.started_at}${crossed}`;
  }
  if (attempt.outcome === 'pending') return 'under way, not finished';
  const late = attempt.after_cancel;
  if (late !== null) {
    if (late.started_at !== null) return 'it was out when the run was cancelled (what came of it: below)';
    return late.error !== null && late.error.code.endsWith('_withdrawn') ? 'nothing sent (withdrawn after the cancel)' : 'nothing sent (it never reached its target: below)';
  }
  // Cancelled or cut off by a restart while out, nothing heard since: it may well have reached its target.
  const evidence = fieldsOf(attempt.evidence);
  if (evidence['effect_sent'] === 'unknown') {
    return `${RESTART_WORDS[String(evidence['reason'])] ?? 'it was out when the run was cancelled'}: it may have reached its target`;
  }
  if (evidence['reason'] === 'runtime_start_interrupted') return 'nothing sent (the runtime ended before it sent any step)';
  if (evidence['reason'] === 'runtime_stopped') return 'nothing sent (the runtime was stopped cleanly before it went out)';
  return 'nothing sent';
}

/** One attempt: its outcome, what went out and what came back; then its error and what it did after a cancel. */
function attemptLines(attempt: RunAttempt, type: RunStep['type']): string[] {
  const sending = sendingOf(attempt, type);
  const head = [`attempt ${attempt.attempt} (fence ${attempt.fence}): ${attempt.outcome}${attempt.error === null ? '' : ` ${attempt.error.code}`}`, sending];
  const lines = [[...head, ...evidenceParts(attempt.evidence, sending.startsWith('sent'))].join('; ')];
  if (attempt.error !== null) lines.push(`    ${attempt.error.message}`);
  const late = attempt.after_cancel;
  if (late !== null) {
    const parts = [`after the cancel: ${late.outcome}${late.error === null ? '' : ` ${late.error.code}`} at ${late.at}`, late.started_at === null ? 'nothing sent' : `sent ${late.started_at}`];
    lines.push(`    ${[...parts, ...evidenceParts(late.evidence, late.started_at !== null)].join('; ')}`);
    if (late.error !== null) lines.push(`    ${late.error.message}`);
  }
  return lines;
}

/** A step's status; one still pending in a cancelled or failed run never ran (a failed run that is resumed runs it then). */
function stepStatusOf(step: RunStep, run: Run): string {
  if (step.status !== 'pending') return step.status;
  if (run.state === 'cancelled') return 'not run (the run was cancelled)';
  if (run.state === 'failed') return 'not run (the run failed before it)';
  return step.status;
}

function stepLines(step: RunStep, run: Run): string[] {
  const lines = [`  step ${step.index + 1} "${step.id}" (${step.type}): ${stepStatusOf(step, run)}`];
  if (step.earlier_attempts_dropped > 0) lines.push(`      (${step.earlier_attempts_dropped} earlier attempts no longer kept)`);
  for (const attempt of step.attempts) lines.push(...attemptLines(attempt, step.type).map((line) => `      ${line}`));
  return lines;
}

export function explainRun(run: Run): string {
  const lines = [`run ${run.run_id} (workflow ${run.workflow_id} v${run.workflow_version}, ${run.environment}): ${run.state}`, `  event ${run.event_id}; created ${run.created_at}, updated ${run.updated_at}`];
  // A failed run cancelled afterwards keeps its error: told as past, as runLine does.
  if (run.error !== null) lines.push(run.state === 'failed' ? `  failed: ${failureOf(run.error)}` : `  had failed (before it was cancelled): ${failureOf(run.error)}`);
  if (run.cancel_reason !== null) lines.push(`  cancelled: ${run.cancel_reason}`);
  if (run.skip_side_effects) lines.push('  webhook steps are recorded as skipped, not sent (its event is a skip replay, or derived from one)');
  const last = run.resumes.at(-1);
  if (last !== undefined) lines.push(`  resumed ${run.resumes.length === 20 ? 'at least 20 times' : `${run.resumes.length} time${run.resumes.length === 1 ? '' : 's'}`}, last at ${last.at}`);
  if (run.retry_at !== null) lines.push(`  next attempt at ${run.retry_at}`);
  if (run.wake_at !== null) lines.push(`  waiting until ${run.wake_at}`);
  if (run.state === 'queued') {
    const started = run.steps.some((step) => step.attempts.length > 0);
    lines.push(`  queued: waiting for one of the org's max_concurrent_runs slots for ${run.environment} runs, taken at once when one is free (${started ? 'it has started, so it goes ahead of the org\'s new runs' : 'first in first out; runs that have started go first'})`);
  }
  for (const step of run.steps) lines.push(...stepLines(step, run));
  if (run.state === 'failed') {
    const from = run.error === null ? '' : ` from step "${run.error.step_id}" (completed steps are not run again; its steps keep their idempotency keys)`;
    lines.push(`  next (a developer key): sluice resume ...${environmentFlag(run.environment)} --run ${run.run_id} continues it${from}`);
  }
  return printableLines(lines);
}

/** The failed events listed by `sluice failed`, newest first: each with its failed runs' reasons. */
export function explainFailedEvents(failed: readonly FailedEvent[], limit: number, environment: string): string {
  if (failed.length === 0) return 'no events with failed runs';
  const count = `${failed.length} event${failed.length === 1 ? '' : 's'}`;
  const lines = [`${count} with failed runs, newest first${failed.length === limit ? ' (the --limit: there may be more)' : ''}:`];
  for (const { event, runs, failed_runs: count } of failed) {
    const described = 'type' in event ? `${event.type}  ${event.received_at}` : '(the event itself is no longer kept)';
    lines.push(`${event.id}  ${described}  ${count} failed run${count === 1 ? '' : 's'}${count > runs.length ? ` (${runs.length} shown)` : ''}`);
    for (const run of runs) lines.push(`  ${runLine(run)}`);
  }
  const flag = environmentFlag(environment);
  lines.push(`next: sluice explain ...${flag} --run <run id> shows a run; sluice resume ...${flag} --run <run id> continues a failed one`);
  return printableLines(lines);
}
