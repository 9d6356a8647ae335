// The secrets vault: AES-256-GCM per value (random 96-bit nonce, AAD = org\0action\0key) under the
// master key, stored in the runner's LMDB. Reads fail closed; values never appear in errors or logs.
import { createCipheriv, createDecipheriv, createHash, randomBytes, type KeyObject } from 'node:crypto';
import type { SecretKey, SecretScope } from './requests.ts';
import { OrganizationForgottenError, SecretLimitError, SecretUnreadableError } from './runner-error.ts';
import type { RunnerStore, SecretRecordKey } from './store.ts';

/** Sealed layout: version(1) | nonce(12) | tag(16) | ciphertext. Key rotation needs no marker: see master-key-rotation.ts. */
const SEAL_VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + NONCE_BYTES + TAG_BYTES;

const recordKey = (scope: SecretScope, key: string): SecretRecordKey => [scope.orgId, scope.actionId, key];

/** Secrets one action may hold; a run can read at most 25 of them (its `read_secret` permissions). */
export const MAX_SECRETS_PER_ACTION = 100;

/** Binds a ciphertext to its place: moving it to another org, action or key makes it unreadable. */
export const recordAad = ([orgId, actionId, key]: SecretRecordKey): Buffer => Buffer.from(`${orgId}\0${actionId}\0${key}`, 'utf8');

export const secretAad = (scope: SecretScope, key: string): Buffer => recordAad(recordKey(scope, key));

export function sealSecret(masterKey: KeyObject, aad: Buffer, plaintext: string): Buffer {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', masterKey, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from([SEAL_VERSION]), nonce, cipher.getAuthTag(), ciphertext]);
}

/** The plaintext, or `undefined` when the sealed bytes do not authenticate (tampered, truncated, other key). */
export function openSealedSecret(masterKey: KeyObject, aad: Buffer, sealed: Uint8Array): string | undefined {
  if (sealed.length < HEADER_BYTES || sealed[0] !== SEAL_VERSION) return undefined;
  const nonce = sealed.subarray(1, 1 + NONCE_BYTES);
  const tag = sealed.subarray(1 + NONCE_BYTES, HEADER_BYTES);
  try {
    const decipher = createDecipheriv('aes-256-gcm', masterKey, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(sealed.subarray(HEADER_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}

export class SecretVault {
  readonly #store: RunnerStore;
  readonly #masterKey: KeyObject;
  /** Whether the org was forgotten (forgotten-orgs.ts): no secret of it is stored any more. */
  readonly #forgotten: (orgId: string) => boolean;

  constructor(store: RunnerStore, masterKey: KeyObject, forgotten: (orgId: string) => boolean = () => false) {
    this.#store = store;
    this.#masterKey = masterKey;
    this.#forgotten = forgotten;
  }

  /**
   * Creates or replaces a secret; resolves after the sealed value is durable. A new key past
   * MAX_SECRETS_PER_ACTION is refused (SecretLimitError): the vault and the key list stay bounded.
   */
  async put(scope: SecretScope, key: SecretKey, value: string): Promise<void> {
    const sealed = sealSecret(this.#masterKey, secretAad(scope, key), value);
    const secrets = this.#store.secrets;
    const id = recordKey(scope, key);
    const stored = await this.#store.durable(
      secrets.transaction(() => {
        // Asked in the write: one queued before the org's mark is removed with its other records.
        if (this.#forgotten(scope.orgId)) return 'forgotten';
        if (!secrets.doesExist(id) && this.listKeys(scope).length >= MAX_SECRETS_PER_ACTION) return 'full';
        secrets.putSync(id, sealed);
        this.#store.secretRevisions.putSync(id, revisionMark(sealed, randomBytes(16)));
        return 'stored';
      }),
    );
    if (stored === 'forgotten') throw new OrganizationForgottenError();
    if (stored === 'full') throw new SecretLimitError(MAX_SECRETS_PER_ACTION);
  }

  /**
   * A digest of the revision marks of `keys` (store.ts), read without decrypting anything: it changes
   * whenever one of them is written or deleted, and not when a new master key seals them again (a
   * secret of an earlier release without a mark counts by its sealed bytes, which a rotation keeps
   * as its mark).
   */
  revision(scope: SecretScope, keys: readonly SecretKey[]): string {
    const hash = createHash('sha256');
    for (const key of [...keys].sort()) {
      const id = recordKey(scope, key);
      const sealed = this.#store.secrets.get(id) as Uint8Array | undefined;
      hash.update(`${key}\0`).update(sealed === undefined ? '-' : currentMark(this.#store.secretRevisions.get(id), sealed)).update('\0');
    }
    return hash.digest('base64url');
  }

  /** Key names of one action's secrets, in byte order. */
  listKeys(scope: SecretScope): string[] {
    const keys: string[] = [];
    // Keys are [A-Z0-9_] so '\uffff' sorts after all of them: the range is exactly this scope.
    for (const key of this.#store.secrets.getKeys({ start: [scope.orgId, scope.actionId], end: [scope.orgId, scope.actionId, '\uffff'] })) {
      const name = key[2];
      if (key[0] === scope.orgId && key[1] === scope.actionId && typeof name === 'string') keys.push(name);
    }
    return keys;
  }

  /** Resolves `true` when a secret existed, after its removal is durable. */
  async delete(scope: SecretScope, key: SecretKey): Promise<boolean> {
    const id = recordKey(scope, key);
    const secrets = this.#store.secrets;
    return this.#store.durable(
      secrets.transaction(() => {
        this.#store.secretRevisions.removeSync(id);
        return secrets.doesExist(id) && secrets.removeSync(id);
      }),
    );
  }

  /**
   * The values of `keys` that exist for the scope; missing keys are omitted (absent, not empty).
   * Throws SecretUnreadableError (naming the key only) when a stored value does not authenticate.
   */
  readMany(scope: SecretScope, keys: readonly SecretKey[]): Record<string, string> {
    const values: Record<string, string> = {};
    for (const key of keys) {
      const sealed = this.#store.secrets.get(recordKey(scope, key));
      if (sealed === undefined) continue;
      const value = openSealedSecret(this.#masterKey, secretAad(scope, key), sealed);
      if (value === undefined) throw new SecretUnreadableError(key);
      values[key] = value;
    }
    return values;
  }
}

/**
 * A stored revision mark: the sha256 of the sealed value it was written with, then the mark. An
 * earlier release's runner writes a secret without touching its mark (a rollback), so a mark counts
 * only while it still belongs to the sealed value stored beside it.
 */
export function revisionMark(sealed: Uint8Array, mark: Uint8Array): Buffer {
  return Buffer.concat([sealedDigest(sealed), mark]);
}

const sealedDigest = (sealed: Uint8Array): Buffer => createHash('sha256').update(sealed).digest();

/** The mark a secret is known by now, as `revision` reads it: its own (`stored`) when it belongs to `sealed`, else the sealed bytes. */
export function currentMark(stored: Uint8Array | undefined, sealed: Uint8Array): Uint8Array {
  const belongs = stored !== undefined && stored.length >= 32 && Buffer.from(stored.subarray(0, 32)).equals(sealedDigest(sealed));
  return belongs ? stored.subarray(32) : sealed;
}
