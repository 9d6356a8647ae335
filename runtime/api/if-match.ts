// Optimistic concurrency for workflow writes. Every answer naming one workflow carries
// `ETag: "<version>"`; a client that read version N and sends `If-Match: "N"` with its PUT, PATCH or
// toggle has the write refused (412 workflow_version_mismatch, naming the version there now) when
// the workflow moved on meanwhile: another editor's update, or an operator's disable that a stale
// full-document PUT would otherwise undo. Without the header a write applies onto whatever version
// is current, the last writer winning. `If-Match: *` asks only that the workflow exists.

import { InputError, SluiceError, type ErrorBody } from '../errors.ts';

/** The ETag header of an answer naming the workflow at `version`. */
export const versionTag = (version: number): Record<string, string> => ({ etag: `"${version}"` });

/** The version the request's If-Match names; undefined without one, or for `*`. */
export function parseIfMatch(header: string | undefined): number | undefined {
  if (header === undefined) return undefined;
  const given = header.trim();
  if (given === '*') return undefined;
  const version = /^"([1-9][0-9]{0,15})"$/.exec(given)?.[1];
  if (version === undefined || !Number.isSafeInteger(Number(version))) {
    throw new InputError(400, 'invalid_if_match', 'If-Match names the workflow version the change was made from, quoted as its ETag says ("3"), or is *.', { field: 'if-match' });
  }
  return Number(version);
}

export class VersionMismatchError extends SluiceError {
  constructor(
    readonly expected: number,
    readonly current: number,
  ) {
    super(412, 'workflow_version_mismatch', `The workflow is at version ${current} now, not ${expected} (If-Match): it changed since it was read. Read it again and make the change on that version.`, { field: 'if-match' });
  }

  override toBody(): ErrorBody {
    const body = super.toBody();
    return { error: { ...body.error, current_version: this.current } as ErrorBody['error'] };
  }
}

/** Throws VersionMismatchError when the request named a version other than `current`. */
export function assertVersionMatches(expected: number | undefined, current: number): void {
  if (expected !== undefined && expected !== current) throw new VersionMismatchError(expected, current);
}
