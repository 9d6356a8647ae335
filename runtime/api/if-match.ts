// Optimistic concurrency for API writes. Every answer naming one workflow carries
// `ETag: "<version>"`; a client that read version N and sends `If-Match: "N"` with its PUT, PATCH or
// toggle has the write refused (412 workflow_version_mismatch, naming the version there now) when
// the workflow moved on meanwhile: another editor's update, or an operator's disable that a stale
// full-document PUT would otherwise undo. Sources, devices, schedules and custom actions have no
// version number: their ETag is made from the record's id (one made again under its name is
// another) and when it was created and last written (each write moves `updated_at` on,
// update-stamp.ts), and a PATCH or DELETE naming another is 412 etag_mismatch.
// The header is matched as RFC 9110 says: a list of tags, compared strongly (a weak tag never
// matches), or `*` (the record exists). Without it a write applies onto whatever is stored now,
// the last writer winning.

import { InputError, SluiceError, type ErrorBody } from '../errors.ts';

/** The ETag header of an answer naming the workflow at `version`. */
export const versionTag = (version: number): Record<string, string> => ({ etag: `"${version}"` });

/** What If-Match asks: `*` (the workflow exists), or the strong tags it lists (a weak tag never matches). */
export type IfMatch = '*' | readonly string[];

/** One entity tag of a list (RFC 9110): optional W/, a quoted opaque value, then a comma or the end. */
const ENTITY_TAG = /[ \t]*(W\/)?"([\x21\x23-\x7e\x80-\xff]*)"[ \t]*(?:,|$)/y;

const ifMatchRefusal = (): InputError =>
  new InputError(400, 'invalid_if_match', 'If-Match is * or a list of entity tags, each quoted as the ETag header gave it ("3" names version 3 of a workflow).', { field: 'if-match' });

/** The request's If-Match; undefined without one. A header that is no list of entity tags is 400. */
export function parseIfMatch(header: string | undefined): IfMatch | undefined {
  if (header === undefined) return undefined;
  if (header.trim() === '*') return '*';
  if (header.trim() === '') throw ifMatchRefusal();
  const strong: string[] = [];
  ENTITY_TAG.lastIndex = 0;
  while (ENTITY_TAG.lastIndex < header.length) {
    const tag = ENTITY_TAG.exec(header);
    if (tag === null) throw ifMatchRefusal();
    if (tag[1] === undefined) strong.push(tag[2]!);
  }
  return strong;
}

export class VersionMismatchError extends SluiceError {
  constructor(readonly current: number) {
    super(412, 'workflow_version_mismatch', `The workflow is at version ${current} now, which If-Match does not name: it changed since it was read. Read it again and make the change on that version.`, { field: 'if-match' });
  }

  override toBody(): ErrorBody {
    const body = super.toBody();
    return { error: { ...body.error, current_version: this.current } as ErrorBody['error'] };
  }
}

/** Whether the request's If-Match lets a write onto what is stored now (its tag's value `current`): none, `*`, or a list naming it. */
const ifMatchMet = (ifMatch: IfMatch | undefined, current: string): boolean => ifMatch === undefined || ifMatch === '*' || ifMatch.includes(current);

/** Throws VersionMismatchError when the request's If-Match lists tags and none is `current`'s (compared strongly). */
export function assertVersionMatches(ifMatch: IfMatch | undefined, current: number): void {
  if (!ifMatchMet(ifMatch, String(current))) throw new VersionMismatchError(current);
}

/** A record stamped when it was made and each time it was written since (update-stamp.ts). */
export interface StampedRecord {
  /** Absent only on sources made before sources had one. */
  readonly id?: string;
  readonly created_at: string;
  readonly updated_at: string;
}

/** The opaque value of a stamped record's ETag: its id, creation and last write (base-36 milliseconds). */
const stampTag = (record: StampedRecord): string => `${record.id === undefined ? '' : `${record.id}.`}${Date.parse(record.created_at).toString(36)}.${Date.parse(record.updated_at).toString(36)}`;

/** The ETag header of an answer naming one source, device, schedule, custom action or organization as `record` is now. */
export const recordTag = (record: StampedRecord): Record<string, string> => ({ etag: `"${stampTag(record)}"` });

export class RecordChangedError extends SluiceError {
  constructor(what: string, readonly current: string) {
    super(412, 'etag_mismatch', `The ${what} changed since it was read: its ETag is now "${current}", which If-Match does not name. Read it again and make the change on what is there now.`, { field: 'if-match' });
  }

  override toBody(): ErrorBody {
    const body = super.toBody();
    return { error: { ...body.error, current_etag: `"${this.current}"` } as ErrorBody['error'] };
  }
}

/** The refusal (naming the record as `what`) when If-Match lists tags and none is `stored`'s; undefined when the write may go on. */
export function recordMismatch(ifMatch: IfMatch | undefined, stored: StampedRecord, what: string): RecordChangedError | undefined {
  const current = stampTag(stored);
  return ifMatchMet(ifMatch, current) ? undefined : new RecordChangedError(what, current);
}

/**
 * The request's If-Match (`header`; 400 when it is no list of tags) as a check of one record, named
 * `what` in its refusal: it throws recordMismatch's 412 for a record the tags do not name. A write
 * calls it on the record it addressed (refused before any work when already stale) and again inside
 * its write, on the record as stored then.
 */
export function recordPrecondition(header: string | undefined, what: string): (record: StampedRecord) => void {
  const ifMatch = parseIfMatch(header);
  return (record) => {
    const refusal = recordMismatch(ifMatch, record, what);
    if (refusal !== undefined) throw refusal;
  };
}
