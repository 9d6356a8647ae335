// Parses the body of a workflow create or update into a complete, validated draft, assigning
// step ids where none were given and keeping the ids an update repeats.
//
// Error rule: every error raised here is a 400 InputError, shape and meaning alike — the
// document as sent is wrong, and sending it again fails the same way. `code` is
// `invalid_request` unless a rule has its own (`unknown_field`, `unsupported_step_type`,
// `duplicate_step_id`, `invalid_url`, `forbidden_header`, `invalid_duration`); `field` is always
// the path (`steps[1].url`). 422 stays reserved for an event payload rejected by a declared
// JSON Schema (DESIGN §5); references to other resources (does `action_id` exist and is it
// approved?) are the handler's to check against the store, and fail at run time otherwise.
// Hand-written rather than ajv: the cross-field rules (id stability, duplicates, ISO durations,
// header policy, retry ranges) are this product's own contract and each needs its own code.
//
// Update semantics: top-level fields that are absent keep their current value (so a partial
// body and a full body both work); `channel: null` removes the channel; `steps`, when given,
// replaces the whole list. A step that repeats an id keeps that id; a step without one gets
// a fresh id that no step of this or the previous version used, unless it is the previous
// version's step at the same place, unchanged: then it keeps that step's id.

import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { asStepId, type StepId } from '../../actors/ids.ts';
import { describeField, expectRecord, fail, isPresent, pathOf, readEnum, readString, rejectUnknown } from './input-fields.ts';
import { readDisplayName } from '../validation/display-name.ts';

/** A workflow's name: at most 200 characters once trimmed. */
const MAX_WORKFLOW_NAME = 200;
import { parseStep, readGivenStepId } from './parse-step.ts';
import type { WorkflowDraft, WorkflowEnvironment, WorkflowStatus, WorkflowStep } from './workflow-types.ts';
import { EVENT_TYPE_REGEX } from '../sources/source-record.ts';

/** A trigger names an event type, so it follows the event type rule: any other would never fire. */

export const MAX_STEPS = 50;
const WRITABLE = ['name', 'trigger_event', 'environment', 'status', 'channel', 'steps'] as const;
const READ_ONLY = ['id', 'org_id', 'version', 'created_at', 'updated_at'];
const ENVIRONMENTS: readonly WorkflowEnvironment[] = ['production', 'sandbox'];
const STATUSES: readonly WorkflowStatus[] = ['enabled', 'disabled'];

export interface ParseWorkflowOptions {
  /** Mints ids for steps given without one; injected for determinism in tests. */
  readonly newStepId?: () => string;
}

const defaultStepId = (): string => `step_${randomUUID().replaceAll('-', '').slice(0, 12)}`;

/**
 * `existing` absent: a create (`name`, `trigger_event` and `steps` required).
 * `existing` present: an update merged onto it. Returns the full draft of the next version.
 * Throws `InputError` (400) naming the first bad field.
 */
export function parseWorkflowInput(body: unknown, existing?: WorkflowDraft, options: ParseWorkflowOptions = {}): WorkflowDraft {
  const input = expectRecord(body, '');
  rejectUnknown(input, WRITABLE, '', READ_ONLY);
  const need = (key: string): void => {
    if (existing === undefined && !isPresent(input, key)) fail(key, `${describeField(key)} is required.`);
  };
  need('name');
  need('trigger_event');
  need('steps');

  const name = isPresent(input, 'name') ? readDisplayName(input['name'], 'name', MAX_WORKFLOW_NAME, existing?.name) : existing?.name;
  const trigger = isPresent(input, 'trigger_event')
    ? readString(input['trigger_event'], 'trigger_event', { max: 128, pattern: EVENT_TYPE_REGEX, patternHint: 'letters, digits, "_", ".", ":" and "-", starting with a letter, digit or "_" (an event type)' })
    : existing?.trigger_event;
  const environment = isPresent(input, 'environment') ? readEnum(input['environment'], 'environment', ENVIRONMENTS) : (existing?.environment ?? 'production');
  // Fixed at creation: run ids depend on it (a sandbox reset would let production runs reuse deleted sandbox runs' ids).
  if (existing !== undefined && environment !== existing.environment) {
    fail('environment', `Field "environment" cannot change (this workflow is in ${existing.environment}); create a new workflow in ${environment} instead.`);
  }
  const status = isPresent(input, 'status') ? readEnum(input['status'], 'status', STATUSES) : (existing?.status ?? 'enabled');
  const channel = readChannel(input, existing);
  const steps = isPresent(input, 'steps') ? parseSteps(input['steps'], existing, options.newStepId ?? defaultStepId) : existing?.steps;
  if (name === undefined || trigger === undefined || steps === undefined) throw new Error('unreachable: required fields checked above');

  return { name, trigger_event: trigger, environment, status, ...(channel === undefined ? {} : { channel }), steps };
}

function readChannel(input: Record<string, unknown>, existing: WorkflowDraft | undefined): string | undefined {
  if (!('channel' in input)) return existing?.channel;
  if (input['channel'] === null) return undefined;
  return readString(input['channel'], 'channel', { max: 64, pattern: /^[a-z0-9_.-]+$/, patternHint: 'lowercase letters, digits, "_", "." and "-"' });
}

function parseSteps(value: unknown, existing: WorkflowDraft | undefined, newStepId: () => string): WorkflowStep[] {
  if (!Array.isArray(value)) return fail('steps', 'Field "steps" must be an array.');
  if (value.length === 0) fail('steps', 'Field "steps" must contain at least one step.');
  if (value.length > MAX_STEPS) fail('steps', `Field "steps" may contain at most ${MAX_STEPS} steps, got ${value.length}.`);

  // First pass: collect given ids, so a minted id can avoid them and duplicates name the later step.
  const given = value.map((raw, index) => readGivenStepId(expectRecord(raw, pathOf('steps', index)), pathOf('steps', index)));
  const firstIndex = new Map<StepId, number>();
  given.forEach((id, index) => {
    if (id === undefined) return;
    const earlier = firstIndex.get(id);
    if (earlier !== undefined) {
      fail(pathOf(pathOf('steps', index), 'id'), `Step id "${id}" is already used by steps[${earlier}].`, 'duplicate_step_id');
    }
    firstIndex.set(id, index);
  });

  const taken = new Set<string>([...firstIndex.keys(), ...(existing?.steps.map((s) => s.id) ?? [])]);
  return value.map((raw, index) => {
    const at = pathOf('steps', index);
    const id = given[index];
    if (id !== undefined) return parseStep(raw, at, id);
    // Sent again unchanged at its place (a document written back as it was first sent, without
    // ids): the step keeps its id, so an update that changes nothing makes no version.
    const same = existing?.steps[index];
    if (same !== undefined && !firstIndex.has(same.id)) {
      const parsed = parseStep(raw, at, same.id);
      return isDeepStrictEqual(parsed, same) ? parsed : { ...parsed, id: mintId(taken, newStepId) };
    }
    return parseStep(raw, at, mintId(taken, newStepId));
  });
}

/** A fresh id, also unused by the previous version so an old step's history is never inherited. */
function mintId(taken: Set<string>, newStepId: () => string): StepId {
  for (let tries = 0; tries < 100; tries += 1) {
    const id = newStepId();
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) throw new Error(`newStepId produced an invalid id: ${id}`);
    if (taken.has(id)) continue;
    taken.add(id);
    return asStepId(id);
  }
  throw new Error('newStepId kept producing ids that are already taken');
}

