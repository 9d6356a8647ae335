// Small readers for untrusted JSON fields: each returns a typed value or throws a 400
// InputError whose `field` is the path (`steps[1].url`) and whose message names it.

import { InputError } from '../errors.ts';
import { shownName } from '../validation/shown-name.ts';
import { characterCount } from '../validation/character-count.ts';

/** Joins a path the way API errors name fields: `steps[1].retry.max_ms`. */
export function pathOf(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return parent === '' ? key : `${parent}.${key}`;
}

export function fail(field: string, message: string, code = 'invalid_request'): never {
  throw new InputError(400, code, message, field === '' ? {} : { field });
}

/** `Field "steps[1].url"`, or `The request body` for the root. */
export const describeField = (field: string): string => (field === '' ? 'The request body' : `Field "${field}"`);

export function expectRecord(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(field, `${describeField(field)} must be a JSON object.`);
  return value as Record<string, unknown>;
}

/** Rejects keys outside `allowed` (typos must not be silently dropped). */
export function rejectUnknown(record: Record<string, unknown>, allowed: readonly string[], parent: string, readOnly: readonly string[] = []): void {
  for (const key of Object.keys(record)) {
    if (allowed.includes(key)) continue;
    const field = pathOf(parent, shownName(key));
    const why = readOnly.includes(key) ? 'is read-only and cannot be written' : 'is not a known field';
    fail(field, `${describeField(field)} ${why}.`, 'unknown_field');
  }
}

export const isPresent = (record: Record<string, unknown>, key: string): boolean => record[key] !== undefined;

export function requirePresent(record: Record<string, unknown>, key: string, parent: string): unknown {
  const value = record[key];
  if (value === undefined || value === null) fail(pathOf(parent, key), `${describeField(pathOf(parent, key))} is required.`);
  return value;
}

const CONTROL = /[\u0000-\u001f\u007f]/;

export interface StringRule {
  readonly min?: number;
  readonly max: number;
  readonly pattern?: RegExp;
  /** Human description of `pattern`, e.g. "letters, digits, _ . : -". */
  readonly patternHint?: string;
  readonly trim?: boolean;
  /** `max` counts characters (code points: an emoji is one), for free text a person reads; else UTF-16 units. */
  readonly characters?: true;
}

export function readString(value: unknown, field: string, rule: StringRule): string {
  if (typeof value !== 'string') fail(field, `${describeField(field)} must be a string.`);
  const text = rule.trim === true ? value.trim() : value;
  const min = rule.min ?? 1;
  if (text.length < min) fail(field, `${describeField(field)} must not be empty.`);
  if ((rule.characters === true ? characterCount(text) : text.length) > rule.max) fail(field, `${describeField(field)} must be at most ${rule.max} characters.`);
  if (CONTROL.test(text)) fail(field, `${describeField(field)} must not contain control characters.`);
  if (rule.pattern !== undefined && !rule.pattern.test(text)) {
    fail(field, `${describeField(field)} may only contain ${rule.patternHint ?? 'allowed characters'}.`);
  }
  return text;
}

export function readInteger(value: unknown, field: string, min: number, max: number, code = 'invalid_request'): number {
  if (typeof value !== 'number') fail(field, `${describeField(field)} must be a number.`);
  // JSON's 1e400 parses as Infinity: a number, only far out of range.
  if (!Number.isFinite(value)) fail(field, `${describeField(field)} must be between ${min} and ${max}.`, code);
  if (!Number.isInteger(value)) fail(field, `${describeField(field)} must be a whole number.`, code);
  if (value < min || value > max) fail(field, `${describeField(field)} must be between ${min} and ${max}.`, code);
  // JSON's -0 is 0: stored, it reads back as 0, and a definition sent again must compare equal to it.
  return value === 0 ? 0 : value;
}

export function readEnum<T extends string>(value: unknown, field: string, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    fail(field, `${describeField(field)} must be one of ${allowed.map((a) => `"${a}"`).join(', ')}.`);
  }
  return value as T;
}
