// Master-key rotation and check: at every start, before the runner serves a call, each secret that
// the current master key cannot open but an earlier key (SLUICE_PREVIOUS_MASTER_KEYS) can is sealed
// again under the current key, durably; afterwards the earlier keys are no longer needed. Secrets no
// given key opens are counted, so a wrong key shows at start rather than at the first read.

import type { KeyObject } from 'node:crypto';
import type { RunnerStore, SecretRecordKey } from './store.ts';
import { currentMark, openSealedSecret, recordAad, revisionMark, sealSecret } from './vault.ts';

/** Secrets sealed again per transaction: bounds each write while a big vault is rotated. */
const RESEAL_BATCH = 500;

export interface ResealCounts {
  /** Secrets that only an earlier key opened, now sealed under the current one. */
  readonly resealed: number;
  /** Secrets that no given key opens; they stay as they are and keep failing closed when read. */
  readonly unreadable: number;
}

/** Re-seals what `previous` keys sealed; resolves with the counts once every change is durable. */
export async function resealUnderCurrentKey(store: RunnerStore, current: KeyObject, previous: readonly KeyObject[]): Promise<ResealCounts> {
  let resealed = 0;
  let unreadable = 0;
  let pending: Array<{ key: SecretRecordKey; sealed: Buffer; was: Uint8Array }> = [];
  const flush = async (): Promise<void> => {
    const batch = pending;
    pending = [];
    if (batch.length === 0) return;
    await store.durable(store.secrets.batch(() => {
      for (const { key, sealed, was } of batch) {
        void store.secrets.put(key, sealed);
        // The value is the same: its mark (or, for a secret without one that belongs, the sealed
        // bytes records knew it by) moves to the new sealed bytes (vault.ts revision).
        void store.secretRevisions.put(key, revisionMark(sealed, currentMark(store.secretRevisions.get(key), was)));
      }
    }));
  };
  for (const { key, value } of store.secrets.getRange({ snapshot: false })) {
    const aad = recordAad(key);
    if (openSealedSecret(current, aad, value) !== undefined) continue;
    const plaintext = firstOpening(previous, aad, value);
    if (plaintext === undefined) {
      unreadable += 1;
      continue;
    }
    pending.push({ key, sealed: sealSecret(current, aad, plaintext), was: value });
    resealed += 1;
    if (pending.length >= RESEAL_BATCH) await flush();
  }
  await flush();
  return { resealed, unreadable };
}

/**
 * Whether any sealed secret opens under one of `keys`: a key file found missing at a rotation is
 * made anew only then (else the given keys are not the vault's, and a new key would open nothing).
 */
export function anyOpensUnder(store: RunnerStore, keys: readonly KeyObject[]): boolean {
  if (keys.length === 0) return false;
  for (const { key, value } of store.secrets.getRange({ snapshot: false })) {
    if (firstOpening(keys, recordAad(key), value) !== undefined) return true;
  }
  return false;
}

/**
 * Which of two keys the vault's secrets open under, in one pass: `first` as soon as a secret opens
 * under `first`; else `second` if any opened under `second`; else `none` (an empty vault too).
 */
export function whichOpens(store: RunnerStore, first: KeyObject, second: KeyObject): 'first' | 'second' | 'none' {
  let secondOpens = false;
  for (const { key, value } of store.secrets.getRange({ snapshot: false })) {
    const aad = recordAad(key);
    if (openSealedSecret(first, aad, value) !== undefined) return 'first';
    if (!secondOpens && openSealedSecret(second, aad, value) !== undefined) secondOpens = true;
  }
  return secondOpens ? 'second' : 'none';
}

function firstOpening(keys: readonly KeyObject[], aad: Buffer, sealed: Uint8Array): string | undefined {
  for (const key of keys) {
    const plaintext = openSealedSecret(key, aad, sealed);
    if (plaintext !== undefined) return plaintext;
  }
  return undefined;
}
