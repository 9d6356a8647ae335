// The vault's 32-byte master key: from SLUICE_MASTER_KEY (64 hex chars or base64 of 32 bytes) or
// from the 0600 file <dataDir>/hook-runner/master.key, generated while the vault is empty (a key file
// lost with secrets sealed under it is an error, not a fresh start). Anything else is refused.
// Earlier keys, for a rotation, come from SLUICE_PREVIOUS_MASTER_KEYS (comma separated).
import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { linkSync, readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { readOrCreatePrivateFile, syncDirectory } from './private-file.ts';
import { RunnerConfigError } from './runner-error.ts';

const HEX_KEY = /^[0-9a-fA-F]{64}$/;
const BASE64_KEY = /^[A-Za-z0-9+/\-_]{43}=?$/;

/** Decodes a master key; the error names the source but never echoes the text. */
export function parseMasterKey(text: string, source: string): KeyObject {
  const trimmed = text.trim();
  let bytes: Buffer | undefined;
  if (HEX_KEY.test(trimmed)) {
    bytes = Buffer.from(trimmed, 'hex');
  } else if (BASE64_KEY.test(trimmed)) {
    const decoded = Buffer.from(trimmed, 'base64');
    const canonical = decoded.toString('base64url');
    // Reject texts whose unused trailing bits are set: they are not the canonical encoding of any key.
    if (decoded.length === 32 && canonical === trimmed.replace(/=$/, '').replace(/\+/g, '-').replace(/\//g, '_')) bytes = decoded;
  }
  if (bytes === undefined) {
    throw new RunnerConfigError(`${source} must be 64 hex characters or the base64 encoding of exactly 32 bytes.`);
  }
  const key = createSecretKey(bytes);
  bytes.fill(0);
  return key;
}

export const masterKeyPath = (storeDir: string): string => join(storeDir, 'master.key');

/** What deciding to create a missing key file needs to know of the vault. */
export interface VaultState {
  /** Secrets sealed in the vault now. */
  readonly sealedSecrets: () => number;
  /** Whether SLUICE_PREVIOUS_MASTER_KEYS was given. */
  readonly previousGiven: boolean;
  /** Whether a sealed secret opens under an earlier key given (SLUICE_PREVIOUS_MASTER_KEYS): a new key file is then a rotation. */
  readonly opensUnderPrevious: () => boolean;
}

/**
 * SLUICE_MASTER_KEY wins when set (even if empty: an empty value is an error, not a fallback). A
 * missing key file is created only when no secret needs the key it would replace (a new key opens
 * none of them, and every run reading one would fail until each was written again), or when an
 * earlier key given opens one of them (a rotation that makes the new key).
 */
export function loadMasterKey(envValue: string | undefined, storeDir: string, vault: VaultState): KeyObject {
  if (envValue !== undefined) return parseMasterKey(envValue, 'SLUICE_MASTER_KEY');
  const path = masterKeyPath(storeDir);
  const file = readOrCreatePrivateFile(path, () => {
    const sealed = vault.sealedSecrets();
    if (sealed > 0 && !vault.opensUnderPrevious()) {
      throw new RunnerConfigError(
        `${path} is missing, but the vault holds ${sealed} secret(s) sealed under a master key${vault.previousGiven ? ', and none opens under SLUICE_PREVIOUS_MASTER_KEYS' : ''}: restore the file or set SLUICE_MASTER_KEY. ` +
          `If that key is lost for good, write a new one into the file yourself (umask 077; openssl rand -hex 32 > ${path}): the secrets it cannot open fail closed until written again.`,
      );
    }
    return randomBytes(32).toString('hex');
  });
  return parseMasterKey(file.text, path);
}

/** The key file's key, or undefined when it is absent, unreadable or not a key (then it is not the vault's key in use). */
function keyInFile(path: string): KeyObject | undefined {
  try {
    return parseMasterKey(readFileSync(path, 'utf8'), path);
  } catch {
    return undefined;
  }
}

/**
 * A key given in SLUICE_MASTER_KEY that opens none of the vault's secrets, while the key file in the
 * store opens some, is refused: it is not this vault's key (a variable copied from another
 * deployment, say), and every secret written under it would split the vault across two keys. Not
 * checked for a rotation (earlier keys given), nor when the file is absent, unreadable or the same key.
 * `whichOpens` answers in one pass over the vault (master-key-rotation.ts).
 */
export function refuseKeyTheFileContradicts(given: KeyObject, storeDir: string, whichOpens: (first: KeyObject, second: KeyObject) => 'first' | 'second' | 'none'): void {
  const path = masterKeyPath(storeDir);
  const fileKey = keyInFile(path);
  if (fileKey === undefined || fileKey.equals(given) || whichOpens(given, fileKey) !== 'second') return;
  throw new RunnerConfigError(
    `SLUICE_MASTER_KEY opens none of the vault's secrets, but the key file ${path} opens them: SLUICE_MASTER_KEY is not this vault's key. ` +
      "Unset it to use the key file, or, to move the vault to the key it gives, give the file's key in SLUICE_PREVIOUS_MASTER_KEYS once (a rotation).",
  );
}

/**
 * After a rotation to a key given in SLUICE_MASTER_KEY that every secret now opens under, a key file
 * still holding one of the earlier keys is moved to master.key.old: left in place, a start without
 * the variable took it for the vault's key and sealed new secrets under it (the vault split across
 * two keys); moved, such a start is refused (the file is missing while secrets are sealed). A
 * master.key.old already there is not replaced: the file stays, with a warning.
 */
export function retireRotatedKeyFile(storeDir: string, previous: readonly KeyObject[], log: (line: string) => void): void {
  const path = masterKeyPath(storeDir);
  const fileKey = keyInFile(path);
  if (fileKey === undefined || !previous.some((key) => key.equals(fileKey))) return;
  const old = `${path}.old`;
  try {
    // A link fails when master.key.old exists (no check-then-rename race), and the key is never without a name.
    linkSync(path, old);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    log(`hook-runner: warning: ${path} still holds a previous master key and ${old} exists, so it was not moved: move it out, or a start without SLUICE_MASTER_KEY would seal new secrets under the old key.`);
    return;
  }
  unlinkSync(path);
  syncDirectory(storeDir);
  log(`hook-runner: master key rotation: ${path} held the previous key; moved to ${old} (keep it with backups from before the rotation). SLUICE_MASTER_KEY is the vault's key now: a start without it is refused while secrets are sealed.`);
}

/**
 * Earlier master keys, comma separated; unset means none. Set but blank is an error, as for
 * SLUICE_MASTER_KEY: it is what `$(cat <missing file>)` gives, and rotating from nothing would
 * leave every secret unreadable. Errors name the entry, never its text.
 */
export function parsePreviousMasterKeys(text: string | undefined): KeyObject[] {
  if (text === undefined) return [];
  if (text.trim() === '') throw new RunnerConfigError('SLUICE_PREVIOUS_MASTER_KEYS is set but empty: give the earlier keys (comma separated) or unset it.');
  return text.split(',').map((entry, index) => parseMasterKey(entry, `SLUICE_PREVIOUS_MASTER_KEYS entry ${index + 1}`));
}
