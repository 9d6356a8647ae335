// One step of a workflow document: its type, its id, and the fields that type allows.
// Every problem is a 400 naming the exact field, e.g. `steps[1].type` or `steps[0].retry.max_ms`.

import { shownName } from '../validation/shown-name.ts';
import { asStepId, type StepId } from '../../actors/ids.ts';
import { RETRY_LIMITS, resolveRetryPolicy, type RetryOverride } from '../../actors/retry-policy.ts';
import { describeField, expectRecord, fail, isPresent, pathOf, readInteger, readString, rejectUnknown, requirePresent } from './input-fields.ts';
import { MAX_DELAY_MS, parseIsoDuration } from './parse-duration.ts';
import { PROTO_KEY } from '../validation/proto-key.ts';
import { parseWebhookHeaders, parseWebhookUrl } from './parse-webhook-target.ts';
import { STEP_TYPES, type StepRetry, type WorkflowStep, type WorkflowStepType } from './workflow-types.ts';

export const STEP_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const DEFAULT_TIMEOUT_MS = 10_000;
const TIMEOUT_RANGE = [100, 60_000] as const;

const FIELDS: Record<WorkflowStepType, readonly string[]> = {
  webhook: ['id', 'type', 'url', 'headers', 'timeout_ms', 'retry'],
  custom_action: ['id', 'type', 'action_id', 'retry'],
  delay: ['id', 'type', 'duration_ms', 'duration'],
};

/** The step's type, checked before anything else so later errors can speak about that type. */
export function readStepType(step: Record<string, unknown>, field: string): WorkflowStepType {
  const at = pathOf(field, 'type');
  const type = requirePresent(step, 'type', field);
  if (typeof type !== 'string') return fail(at, `${describeField(at)} must be a string.`);
  if (!(STEP_TYPES as readonly string[]).includes(type)) {
    const known = STEP_TYPES.map((t) => `"${t}"`).join(', ');
    fail(at, `Step type "${shownName(type)}" is not supported; use one of ${known}.`, 'unsupported_step_type');
  }
  return type as WorkflowStepType;
}

/** The id the author gave, if any. Assigning missing ids is the document parser's job. */
export function readGivenStepId(step: Record<string, unknown>, field: string): StepId | undefined {
  if (!isPresent(step, 'id')) return undefined;
  const id = readString(step['id'], pathOf(field, 'id'), { max: 64, pattern: STEP_ID_PATTERN, patternHint: 'letters, digits, "_" and "-"' });
  // Later steps get earlier results keyed by step id: that key would be dropped (proto-key.ts).
  if (id === PROTO_KEY) fail(pathOf(field, 'id'), `A step id may not be "${PROTO_KEY}".`);
  return asStepId(id);
}

/** Parses one step (`field` is its path, `steps[3]`); `id` is the given or newly assigned id. */
export function parseStep(value: unknown, field: string, id: StepId): WorkflowStep {
  const step = expectRecord(value, field);
  const type = readStepType(step, field);
  rejectUnknown(step, FIELDS[type], field);
  switch (type) {
    case 'webhook': {
      const retry = parseRetry(step, field);
      return {
        id,
        type,
        url: parseWebhookUrl(requirePresent(step, 'url', field), pathOf(field, 'url')),
        headers: isPresent(step, 'headers') ? parseWebhookHeaders(step['headers'], pathOf(field, 'headers')) : {},
        timeout_ms: isPresent(step, 'timeout_ms')
          ? readInteger(step['timeout_ms'], pathOf(field, 'timeout_ms'), TIMEOUT_RANGE[0], TIMEOUT_RANGE[1])
          : DEFAULT_TIMEOUT_MS,
        ...(retry === undefined ? {} : { retry }),
      };
    }
    case 'custom_action': {
      const retry = parseRetry(step, field);
      const actionId = readString(requirePresent(step, 'action_id', field), pathOf(field, 'action_id'), { max: 128, trim: true });
      return { id, type, action_id: actionId, ...(retry === undefined ? {} : { retry }) };
    }
    case 'delay':
      return parseDelay(step, field, id);
  }
}

function parseDelay(step: Record<string, unknown>, field: string, id: StepId): WorkflowStep {
  const hasMs = isPresent(step, 'duration_ms');
  const hasIso = isPresent(step, 'duration');
  if (!hasMs && !hasIso) fail(pathOf(field, 'duration_ms'), `A delay step needs "duration_ms" or "duration" (ISO-8601, e.g. "PT5M").`);
  const ms = hasMs ? readInteger(step['duration_ms'], pathOf(field, 'duration_ms'), 1, MAX_DELAY_MS, 'invalid_duration') : undefined;
  if (!hasIso) return { id, type: 'delay', duration_ms: ms as number };
  const at = pathOf(field, 'duration');
  const text = readString(step['duration'], at, { max: 64, trim: true }).toUpperCase();
  const parsed = parseIsoDuration(text);
  if (!parsed.ok) fail(at, `${describeField(at)} ${parsed.reason}.`, 'invalid_duration');
  if (parsed.ms > MAX_DELAY_MS) fail(at, `${describeField(at)} must be at most 30 days.`, 'invalid_duration');
  // Both, as the API answers a step given as `duration` (so a step read back can be written back), must agree.
  if (ms !== undefined && ms !== parsed.ms) fail(at, `Give either "duration_ms" or "duration", or both meaning the same time ("${text}" is ${parsed.ms} ms, not ${ms}).`);
  return { id, type: 'delay', duration_ms: parsed.ms, duration: text };
}

/** A complete retry schedule (missing fields from the default), or undefined when not given. */
function parseRetry(step: Record<string, unknown>, field: string): StepRetry | undefined {
  if (!isPresent(step, 'retry')) return undefined;
  const at = pathOf(field, 'retry');
  const record = expectRecord(step['retry'], at);
  rejectUnknown(record, ['max_retries', 'initial_ms', 'max_ms'], at);
  const override: { -readonly [K in keyof RetryOverride]: number } = {};
  if (isPresent(record, 'max_retries')) override.max_retries = readInteger(record['max_retries'], pathOf(at, 'max_retries'), 0, RETRY_LIMITS.maxRetries);
  if (isPresent(record, 'initial_ms')) override.initial_ms = readInteger(record['initial_ms'], pathOf(at, 'initial_ms'), 1, RETRY_LIMITS.maxMs);
  if (isPresent(record, 'max_ms')) override.max_ms = readInteger(record['max_ms'], pathOf(at, 'max_ms'), 1, RETRY_LIMITS.maxMs);
  const policy = resolveRetryPolicy(override);
  if (policy.maxMs < policy.initialMs) {
    fail(pathOf(at, 'max_ms'), `Field "${pathOf(at, 'max_ms')}" must be at least initial_ms (${policy.initialMs}).`);
  }
  return { max_retries: policy.maxRetries, initial_ms: policy.initialMs, max_ms: policy.maxMs };
}
