// Parses a custom-action upload (`multipart/form-data`: name, description, permissions, file) with
// the server's own multipart parser (uWebSockets.js `getParts`), refusing what that parser would let slip.
//
// uWS 20.30's `getParts` matches the media type case-sensitively, does not unquote a quoted boundary,
// misreads a boundary after another parameter, and on a truncated body silently returns the parts
// before the cut; it also ends a part wherever `--boundary` occurs, even inside a line, dropping
// what follows. So the content type is parsed here and handed over normalized, and a body in which
// the boundary appears anywhere but at the start of a line, or whose last delimiter is not the
// closing one, is refused before any part is trusted.

import { shownName } from '../validation/shown-name.ts';
import uws from 'uWebSockets.js';
import { InputError } from '../errors.ts';
import type { HttpRequest } from '../http/types.ts';
import { parseActionName, parseDescription } from './action-fields.ts';
import { parsePermissionText, type Permission } from './permissions.ts';

/** The largest module accepted (the hook-runner's own limit). */
export const MAX_MODULE_BYTES = 8 * 1024 * 1024;
/** The route's body cap: the module plus room for the text fields and the multipart framing. */
export const UPLOAD_BODY_LIMIT = MAX_MODULE_BYTES + 64 * 1024;
const MAX_TEXT_FIELD_BYTES = 16 * 1024;
const FIELDS = ['name', 'description', 'permissions', 'file'] as const;
type FieldName = (typeof FIELDS)[number];
const BOUNDARY = /^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$/;

export interface ActionUpload {
  /** The module bytes, copied out of the request body. */
  readonly module: Uint8Array;
  readonly name?: string;
  readonly description?: string;
  /** Absent when the form has no permissions field; an empty field means "none". */
  readonly permissions?: Permission[];
}

const malformed = (message: string, field?: string): InputError =>
  new InputError(400, 'malformed_multipart', message, field === undefined ? {} : { field });

/** The boundary of a `multipart/form-data` content type; 415 for any other media type. */
export function multipartBoundary(contentType: string | undefined): string {
  const [mediaType = '', ...params] = (contentType ?? '').split(';');
  if (mediaType.trim().toLowerCase() !== 'multipart/form-data') {
    throw new InputError(415, 'unsupported_media_type', 'A custom action upload must be multipart/form-data with the module in the "file" field.');
  }
  for (const param of params) {
    const separator = param.indexOf('=');
    if (separator < 0 || param.slice(0, separator).trim().toLowerCase() !== 'boundary') continue;
    let value = param.slice(separator + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (!BOUNDARY.test(value)) throw malformed('The multipart boundary is not valid (1-70 characters, RFC 2046).');
    return value;
  }
  throw malformed('The multipart/form-data content type has no boundary parameter.');
}

/**
 * Refuses a body `getParts` would misread. RFC 2046: a delimiter is `--boundary` at the start of
 * the body or of a line, followed by CRLF, or by `--` for the closing one, which ends the parts.
 * getParts cuts a part wherever `--boundary` occurs, and ends at the first closing delimiter: so
 * every occurrence must be one of these, and the closing delimiter the last (a body without it was
 * cut short).
 */
function assertDelimiters(body: Buffer, boundary: string): number {
  const dashed = Buffer.from(`--${boundary}`, 'latin1');
  const inside = (at: number): InputError =>
    malformed(`The multipart boundary "${boundary}" occurs inside a field's content (at byte ${at}): send the form with a boundary that its content does not contain.`);
  let closed = false;
  let opened = 0;
  for (let at = body.indexOf(dashed); at >= 0; at = body.indexOf(dashed, at + dashed.length)) {
    if (closed) throw inside(at);
    if (at !== 0 && !(body[at - 2] === 0x0d && body[at - 1] === 0x0a)) throw inside(at);
    const after = at + dashed.length;
    if (body[after] === 0x2d && body[after + 1] === 0x2d) closed = true;
    else if (body[after] === 0x0d && body[after + 1] === 0x0a) opened += 1;
    else {
      // At a line's start but not ended by CRLF: white space before the line break (RFC 2046
      // transport padding) or a bare LF, which the parser does not read; or content of a part.
      if (body[after] === 0x20 || body[after] === 0x09 || body[after] === 0x0a) {
        throw malformed(`The multipart boundary line at byte ${at} must end with CRLF right after the boundary (white space after it, or a bare LF, is not read here).`);
      }
      throw inside(at);
    }
  }
  if (!closed) throw malformed('The multipart body is incomplete: its closing boundary is missing.');
  return opened;
}

/** The most header lines a part may have: uWS's parser stops at a part with more (and drops the rest). */
const MAX_PART_HEADERS = 9;

/** Each named part once; unknown or repeated fields are refused so a typo is never silently dropped. */
function readParts(body: Buffer, boundary: string): Map<FieldName, Buffer> {
  const opened = assertDelimiters(body, boundary);
  const parts = uws.getParts(body, `multipart/form-data; boundary=${boundary}`) ?? [];
  // The parser returns the parts before the first it cannot read: that one and every later one
  // would be dropped (narrower permissions, say, never applied).
  if (parts.length < opened) {
    throw malformed(`Part ${parts.length + 1} of the multipart body cannot be read: its headers must end with a blank line, and a part has at most ${MAX_PART_HEADERS} header lines.`);
  }
  if (parts.length === 0) throw malformed('The multipart body holds no readable parts.');
  const fields = new Map<FieldName, Buffer>();
  for (const part of parts) {
    const name = part.name as string | undefined;
    if (name === undefined || name === '') throw malformed('Every multipart part needs a Content-Disposition name.');
    if (!(FIELDS as readonly string[]).includes(name)) {
      throw new InputError(400, 'unknown_field', `Field "${shownName(name)}" is not a known field (name, description, permissions, file).`, { field: shownName(name) });
    }
    if (fields.has(name as FieldName)) throw new InputError(400, 'duplicate_field', `Field "${name}" appears more than once.`, { field: name });
    // `data` points into the request body's memory: copy it before anything else can touch the body.
    fields.set(name as FieldName, Buffer.from(new Uint8Array(part.data).slice()));
  }
  return fields;
}

function text(fields: Map<FieldName, Buffer>, name: Exclude<FieldName, 'file'>): string | undefined {
  const bytes = fields.get(name);
  if (bytes === undefined) return undefined;
  if (bytes.byteLength > MAX_TEXT_FIELD_BYTES) throw new InputError(400, 'invalid_request', `Field "${name}" must be at most ${MAX_TEXT_FIELD_BYTES} bytes.`, { field: name });
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new InputError(400, 'invalid_request', `Field "${name}" is not valid UTF-8.`, { field: name });
  }
}

/**
 * 415 unless multipart/form-data; 400 for a malformed form, a missing or empty `file`, a bad name,
 * description or permission (naming the field); 413 `module_too_large` past MAX_MODULE_BYTES.
 */
export function parseActionUpload(request: Pick<HttpRequest, 'headers' | 'body'>, options: { readonly requireName: boolean }): ActionUpload {
  const fields = readParts(request.body, multipartBoundary(request.headers['content-type']));
  const module = fields.get('file');
  if (module === undefined) throw new InputError(400, 'module_required', 'The form must carry the WebAssembly module in a "file" field.', { field: 'file' });
  if (module.byteLength === 0) throw new InputError(400, 'module_empty', 'The uploaded module is empty.', { field: 'file' });
  if (module.byteLength > MAX_MODULE_BYTES) {
    throw new InputError(413, 'module_too_large', `The module is ${module.byteLength} bytes; the limit is ${MAX_MODULE_BYTES} (8 MiB).`, { field: 'file' });
  }
  const name = text(fields, 'name');
  if (name === undefined && options.requireName) throw new InputError(400, 'invalid_request', 'Field "name" is required.', { field: 'name' });
  // Form encoding turns every line break of a text field into CRLF (HTML spec); store them as typed.
  const description = text(fields, 'description')?.replace(/\r\n/g, '\n');
  const permissions = text(fields, 'permissions');
  return {
    module,
    ...(name === undefined ? {} : { name: parseActionName(name) }),
    ...(description === undefined ? {} : { description: parseDescription(description) }),
    ...(permissions === undefined ? {} : { permissions: parsePermissionText(permissions) }),
  };
}
