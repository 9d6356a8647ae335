// The platform admin token: given by flag/env, or generated once into a private (0600) file in the
// data dir, created crash-safely. Only this token may create organizations.

import { readOrCreatePrivateFile } from '../../hook-runner/private-file.ts';
import { generateToken } from './secrets.ts';

export interface AdminToken {
  readonly token: string;
  /** The file holding the token, when it came from one. */
  readonly file: string | undefined;
}

/** What an admin token must be, given or in its file: one a bearer header can carry, not guessable by length. */
export const ADMIN_TOKEN_PATTERN = /^\S{16,512}$/;

/**
 * Returns the configured token, else the one in `file`, else a new one written to `file`. Throws
 * when the file is readable by group or others, or holds no usable token (ADMIN_TOKEN_PATTERN:
 * a token with whitespace or past 512 characters could never be sent, and every request would be 401).
 */
export function loadAdminToken(configured: string | undefined, file: string): AdminToken {
  if (configured !== undefined && configured !== '') return { token: configured, file: undefined };
  const { text } = readOrCreatePrivateFile(file, () => generateToken('sluice_admin_'));
  if (!ADMIN_TOKEN_PATTERN.test(text)) {
    throw new Error(`${file} holds no usable token: it must be 16-512 characters without whitespace (it holds ${text.length}${/\s/.test(text) ? ', with whitespace' : ''}); put one in it, or delete it to have one generated.`);
  }
  return { token: text, file };
}
