// The platform admin token: given by flag/env, or generated once into a private (0600) file in the
// data dir, created crash-safely. Only this token may create organizations.

import { readOrCreatePrivateFile } from '../../hook-runner/private-file.ts';
import { generateToken } from './secrets.ts';

export interface AdminToken {
  readonly token: string;
  /** The file holding the token, when it came from one. */
  readonly file: string | undefined;
}

/** Shortest token the file may hold, as for `--admin-token`. */
const MIN_TOKEN_LENGTH = 16;

/**
 * Returns the configured token, else the one in `file`, else a new one written to `file`. Throws
 * when the file is readable by group or others, or holds a token too short to use.
 */
export function loadAdminToken(configured: string | undefined, file: string): AdminToken {
  if (configured !== undefined && configured !== '') return { token: configured, file: undefined };
  const { text } = readOrCreatePrivateFile(file, () => generateToken('sluice_admin_'));
  if (text.length < MIN_TOKEN_LENGTH) throw new Error(`${file} holds a token shorter than ${MIN_TOKEN_LENGTH} characters; put a longer one in it, or delete it to have one generated.`);
  return { token: text, file };
}
