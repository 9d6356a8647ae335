// The platform admin token: given by flag/env, or generated once into a 0600 file in the data dir.
// Only this token may create organizations.

import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { generateToken } from './secrets.ts';

export interface AdminToken {
  readonly token: string;
  /** The file holding the token, when it came from one. */
  readonly file: string | undefined;
}

/** Returns the configured token, else the one in `file`, else a new one written to `file` with mode 0600. */
export function loadAdminToken(configured: string | undefined, file: string): AdminToken {
  if (configured !== undefined && configured !== '') return { token: configured, file: undefined };
  if (existsSync(file)) {
    const token = readFileSync(file, 'utf8').trim();
    if (token.length >= 16) return { token, file };
  }
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const token = generateToken('sluice_admin_');
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { token, file };
}
