// The editable text fields of a custom action (name, description, review reason), shared by the
// multipart upload and the JSON endpoints so both give the same errors for the same mistakes.

import { InputError } from '../errors.ts';
import { characterCount } from '../validation/character-count.ts';
import { assertDisplayName } from '../validation/display-name.ts';

export const MAX_NAME_LENGTH = 120;
export const MAX_DESCRIPTION_LENGTH = 2000;
export const MAX_REASON_LENGTH = 2000;

/** Multi-line text keeps tabs and line breaks; other control characters are refused. */
const CONTROL_EXCEPT_LINES = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

const invalid = (field: string, message: string): InputError => new InputError(400, 'invalid_request', message, { field });

/** 1-120 characters after trimming, one line, that show (display-name.ts), or the name as stored (`stored`). */
export function parseActionName(value: unknown, field = 'name', stored?: string): string {
  if (typeof value !== 'string') throw invalid(field, `Field "${field}" must be a string.`);
  const name = value.trim();
  if (name.length === 0) throw invalid(field, `Field "${field}" must not be empty.`);
  if (characterCount(name) > MAX_NAME_LENGTH) throw invalid(field, `Field "${field}" must be at most ${MAX_NAME_LENGTH} characters.`);
  // Control characters (C0 and C1) included.
  assertDisplayName(name, field, stored);
  return name;
}

/** Free text up to `max` characters (may be empty), line breaks allowed. */
export function parseLongText(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string') throw invalid(field, `Field "${field}" must be a string.`);
  if (characterCount(value) > max) throw invalid(field, `Field "${field}" must be at most ${max} characters.`);
  if (CONTROL_EXCEPT_LINES.test(value)) throw invalid(field, `Field "${field}" must not contain control characters other than tabs and line breaks.`);
  return value;
}

export const parseDescription = (value: unknown, field = 'description'): string => parseLongText(value, field, MAX_DESCRIPTION_LENGTH);
