// The output contract of a custom action (DESIGN 6.5): the document is the step result; the reserved
// keys `projection` and `derived_event` must have their exact shape, or the step fails naming the field.

import { cutText, shownName } from '../validation/shown-name.ts';
import type { JsonValue } from '../../actors/json.ts';
import { EVENT_TYPE_REGEX } from '../sources/source-record.ts';
import { characterCount } from '../validation/character-count.ts';
import { inexactNumberIn } from '../validation/inexact-number.ts';
import { memberText } from '../validation/json-member-text.ts';
import { MAX_JSON_NESTING, nestsDeeperThan } from '../validation/json-nesting.ts';
import { loneSurrogatePath } from '../validation/lone-surrogate.ts';
import { PROTO_KEY, protoKeyPath } from '../validation/proto-key.ts';
import { CONNECTION_EVENT_TYPES } from '../triggers/device-record.ts';

// Never `.` or `..` alone: each is a segment of the row's URL, and URL clients (fetch, browsers)
// resolve them, `%2E` too, so `/projections/..` would read the organization instead.
export const PROJECTION_NAME = /^(?!\.\.?$)[a-z0-9_.-]{1,120}$/;
export const ENTITY_TYPE = /^(?!\.\.?$)[a-z0-9_.-]{1,64}$/;
const isDotSegment = (text: string): boolean => text === '.' || text === '..';

export interface ProjectionWrite {
  readonly name: string;
  /** Both or neither: with an entity the row is upserted, without one it is appended. */
  readonly entity: { readonly type: string; readonly id: string } | null;
  readonly title: string | null;
  readonly status: string | null;
  readonly data: JsonValue;
}

export interface DerivedEventSpec {
  readonly type: string;
  readonly payload: JsonValue;
}

export interface ActionOutput {
  readonly document: JsonValue;
  readonly projection: ProjectionWrite | null;
  /** null when absent or `false` (suppressed). */
  readonly derivedEvent: DerivedEventSpec | null;
}

/** A reserved key of the wrong shape; `field` names it (e.g. `projection.entity_type`). */
/** The most an output-contract error says: it quotes names the guest chose, and is kept on the run and sent live. */
export const MAX_CONTRACT_ERROR_CHARS = 2048;

export class OutputContractError extends Error {
  readonly field: string;
  constructor(field: string, message: string) {
    super(message.length > MAX_CONTRACT_ERROR_CHARS ? `${cutText(message, MAX_CONTRACT_ERROR_CHARS)}…` : message);
    this.field = cutText(field, MAX_CONTRACT_ERROR_CHARS);
  }
}

/** The members a projection write may have. */
const PROJECTION_KEYS: ReadonlySet<string> = new Set(['name', 'entity_type', 'entity_id', 'title', 'status', 'data']);

const isObject = (value: unknown): value is Record<string, JsonValue> => typeof value === 'object' && value !== null && !Array.isArray(value);

function optionalText(source: Record<string, JsonValue>, key: string, max: number, field: string): string | null {
  const value = source[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || characterCount(value) > max) throw new OutputContractError(field, `${field} must be a string of at most ${max} characters.`);
  return value;
}

/** The projection's status, a part of its status index key. */
function statusOf(source: Record<string, JsonValue>): string | null {
  const status = optionalText(source, 'status', 40, 'projection.status');
  if (status !== null) assertNoControlCharacters(status, 'projection.status');
  return status;
}

/**
 * Refuses a key part holding a control character. The key's encoding (ordered-binary) escapes
 * U+0000-U+0004 only in strings under 64 UTF-16 units: two longer entity_ids with them could share
 * one row, and a status index key (a status of 40 emoji is 80 units) read back as another row's.
 */
function assertNoControlCharacters(text: string, field: string): void {
  if (/[\u0000-\u001f\u007f]/.test(text)) throw new OutputContractError(field, `${field} cannot hold control characters (U+0000-U+001F, U+007F).`);
}

/** `entityIdText` is the entity_id as the output wrote it (a number's literal). */
function parseProjection(value: JsonValue, entityIdText: () => string | undefined): ProjectionWrite {
  if (!isObject(value)) throw new OutputContractError('projection', 'projection must be an object.');
  // A typo (`entityType`, `colour`) would be dropped and the row written without it: an appended
  // row where an upsert was meant.
  const extra = Object.keys(value).find((key) => !PROJECTION_KEYS.has(key));
  if (extra !== undefined) {
    const field = `projection.${shownName(extra)}`;
    throw new OutputContractError(field, `${field} is not a member of a projection, which has only ${[...PROJECTION_KEYS].join(', ')}: it would be lost.`);
  }
  const name = value.name;
  if (typeof name !== 'string' || !PROJECTION_NAME.test(name)) {
    throw new OutputContractError('projection.name', 'projection.name must match [a-z0-9_.-]{1,120} and not be "." or "..".');
  }
  const type = value.entity_type;
  const id = value.entity_id;
  const hasType = type !== undefined && type !== null;
  const hasId = id !== undefined && id !== null;
  if (hasType !== hasId) {
    const missing = hasType ? 'projection.entity_id' : 'projection.entity_type';
    throw new OutputContractError(missing, 'projection.entity_type and projection.entity_id go together: give both or neither.');
  }
  let entity: ProjectionWrite['entity'] = null;
  if (hasType && hasId) {
    if (typeof type !== 'string' || !ENTITY_TYPE.test(type)) {
      throw new OutputContractError('projection.entity_type', 'projection.entity_type must match [a-z0-9_.-]{1,64} and not be "." or "..".');
    }
    // A number past 2^53 was rounded by JSON.parse: two entities would share one row. It must come as a string.
    if (typeof id === 'number' && !Number.isSafeInteger(id)) {
      throw new OutputContractError('projection.entity_id', 'projection.entity_id as a number must be a whole number within ±(2^53 − 1) (9007199254740991); send a larger id as a string.');
    }
    // 4.9999999999999999 parses as 5 and 1e2 as 100: such an id would land on another entity's row.
    if (typeof id === 'number' && !/^(0|-?[1-9]\d*)$/.test(entityIdText() ?? '')) {
      throw new OutputContractError('projection.entity_id', 'projection.entity_id as a number must be written as whole-number digits (no fraction or exponent); send other ids as strings.');
    }
    const text = typeof id === 'number' ? String(id) : id;
    if (typeof text !== 'string' || text.length === 0 || characterCount(text) > 200) {
      throw new OutputContractError('projection.entity_id', 'projection.entity_id must be a string of 1-200 characters or a whole number.');
    }
    if (isDotSegment(text)) throw new OutputContractError('projection.entity_id', 'projection.entity_id cannot be "." or "..": URL clients resolve them as path segments.');
    assertNoControlCharacters(text, 'projection.entity_id');
    entity = { type, id: text };
  }
  return {
    name,
    entity,
    title: optionalText(value, 'title', 200, 'projection.title'),
    status: statusOf(value),
    data: value.data ?? null,
  };
}

function parseDerivedEvent(value: JsonValue): DerivedEventSpec | null {
  if (value === false) return null;
  if (!isObject(value)) throw new OutputContractError('derived_event', 'derived_event must be {"type", "payload"} or false.');
  if (typeof value.type !== 'string' || !EVENT_TYPE_REGEX.test(value.type)) {
    throw new OutputContractError('derived_event.type', 'derived_event.type must be 1-128 letters, digits, "_", ".", ":" or "-".');
  }
  if (CONNECTION_EVENT_TYPES.has(value.type)) {
    throw new OutputContractError('derived_event.type', `derived_event.type "${value.type}" is written by Sluice for device connections only.`);
  }
  // Present, even if null: a forgotten payload is a bug in the action, not an empty event.
  if (!Object.hasOwn(value, 'payload')) throw new OutputContractError('derived_event.payload', 'derived_event.payload is required (any JSON value).');
  const extra = Object.keys(value).find((key) => key !== 'type' && key !== 'payload');
  if (extra !== undefined) throw new OutputContractError(`derived_event.${shownName(extra)}`, `derived_event has only "type" and "payload"; "${shownName(extra)}" would be lost.`);
  return { type: value.type, payload: value.payload ?? null };
}

/** Parses the guest's output document; throws OutputContractError for a reserved key of the wrong shape. */
export function parseActionOutput(outputJson: string): ActionOutput {
  if (nestsDeeperThan(outputJson)) {
    throw new OutputContractError('output', `The action output nests objects and arrays more than ${MAX_JSON_NESTING} levels deep.`);
  }
  let document: JsonValue;
  try {
    document = JSON.parse(outputJson) as JsonValue;
  } catch {
    throw new OutputContractError('output', 'The action output is not valid JSON.');
  }
  const protoAt = protoKeyPath(document);
  if (protoAt !== undefined) throw new OutputContractError('output', `The action output uses the key "${PROTO_KEY}" (at ${protoAt}), which Sluice cannot store.`);
  const surrogateAt = loneSurrogatePath(document);
  if (surrogateAt !== undefined) throw new OutputContractError('output', `The action output holds a lone UTF-16 surrogate at ${surrogateAt}, which Sluice cannot store as it is; strings must be Unicode text.`);
  const output: ActionOutput = isObject(document)
    ? {
        document,
        projection: document.projection === undefined ? null : parseProjection(document.projection, () => memberText(memberText(outputJson, 'projection') ?? '', 'entity_id')),
        derivedEvent: document.derived_event === undefined ? null : parseDerivedEvent(document.derived_event),
      }
    : { document, projection: null, derivedEvent: null };
  // After the reserved keys, whose own errors (a numeric entity_id past 2^53) say more.
  const inexact = inexactNumberIn(outputJson);
  if (inexact !== undefined) {
    const why = Number.isFinite(Number(inexact)) ? 'which JSON.parse cannot keep exactly (a whole number must be within ±(2^53 − 1), 9007199254740991)' : 'which overflows a double (JSON.parse reads it as Infinity)';
    throw new OutputContractError('output', `The action output holds the number ${inexact.slice(0, 40)}, ${why}; write it as a string.`);
  }
  return output;
}
