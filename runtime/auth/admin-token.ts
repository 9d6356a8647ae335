// The platform admin token: given by flag/env, or generated once into a private (0600) file in the
// data dir, created crash-safely. Only this token may create organizations.

import { readOrCreatePrivateFile } from '../../hook-runner/private-file.ts';
import { generateToken } from './secrets.ts';

export interface AdminToken {
  readonly token: string;
  /** The file holding the token, when it came from one. */
  readonly file: string | undefined;
}

/**
 * What an admin token must be, given or in its file: one a bearer header carries as it is (visible
 * ASCII: a header is bytes, so `é` or a control character would not compare equal), not
 * guessable by length.
 */
export const ADMIN_TOKEN_PATTERN = /^[\x21-\x7e]{16,512}$/;
/** The rule, in words, for error messages. */
export const ADMIN_TOKEN_RULE = '16-512 visible ASCII characters (no spaces)';

/**
 * Returns the configured token, else the one in `file`, else a new one written to `file`. Throws
 * when the file is readable by group or others, or holds no usable token (ADMIN_TOKEN_PATTERN:
 * a token no bearer header carries as it is would make every admin request 401).
 */
export function loadAdminToken(configured: string | undefined, file: string): AdminToken {
  if (configured !== undefined && configured !== '') return { token: configured, file: undefined };
  const { text } = readOrCreatePrivateFile(file, () => generateToken('sluice_admin_'));
  if (!ADMIN_TOKEN_PATTERN.test(text)) {
    const other = /[^\x21-\x7e]/.test(text) ? ', not all of them visible ASCII' : '';
    throw new Error(`${file} holds no usable token: it must be ${ADMIN_TOKEN_RULE} (it holds ${text.length}${other}); put one in it, or delete it to have one generated.`);
  }
  return { token: text, file };
}
