// The module bytes an org's custom actions keep, one copy per (org, digest), and the cap on them.
// Modules are kept so that a hook-runner that lost one can be given it again (module-restore.ts),
// and never deleted, so each org may keep at most MAX_MODULE_BYTES_PER_ORG of distinct modules.
// The total is read once per org from its versions and then kept in memory (an LRU), updated by
// each module stored and forgotten when a write fails. The custom action store (the only writer)
// runs each of its writes through `write`, which is how a total read mid-write is told apart.

import { LRUCache } from 'lru-cache';
import { ConflictError, type SluiceError } from '../errors.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerTable } from '../ledger/ledger.ts';
import type { ActionVersionRecord } from './custom-action-record.ts';

/**
 * Module bytes an org's custom actions may hold, each distinct module counted once: 500 actions of
 * 100 versions of 8 MiB would be 400 GB in each of the two stores, and modules are never deleted.
 */
export const MAX_MODULE_BYTES_PER_ORG = 1024 * 1024 * 1024;

/** Orgs whose totals are kept; the least recently used are read again when needed. */
const TOTALS_KEPT = 10_000;
const HIGH = '\uffff';
const DIGEST = /^[0-9a-f]{64}$/;

/** An upload the runner compiled: its bytes, their digest (lower-case hex sha256) and size. */
export interface CompiledUpload {
  readonly bytes: Uint8Array;
  readonly digest: string;
  readonly size: number;
}

export class ModuleStorage {
  readonly #root: Ledger['root'];
  /** custom-action-versions, [orgId, actionId, version] -> ActionVersionRecord: where the org's digests are read from. */
  readonly #versions: LedgerTable;
  /** custom-action-modules, [orgId, digest] -> the module's bytes. */
  readonly #modules: LedgerTable;
  readonly #max: number;
  /** Per org, the bytes of its kept modules (#held). */
  readonly #heldBytes = new LRUCache<string, number>({ max: TOTALS_KEPT });
  /** Writes under way (write). */
  #writing = 0;

  constructor(ledger: Ledger, versions: LedgerTable, max: number) {
    this.#root = ledger.root;
    this.#versions = versions;
    this.#modules = ledger.openDatabase('custom-action-modules');
    this.#max = max;
  }

  /**
   * The bytes of a module some version of this org's actions has (`digest`: lower-case hex sha256 as
   * recorded), as stored: the caller checks them against the digest. Undefined when no version
   * uploaded since the runtime kept bytes has that module.
   */
  bytes(orgId: string, digest: string): Uint8Array | undefined {
    if (!DIGEST.test(digest)) return undefined;
    const bytes = this.#modules.get([orgId, digest]);
    return bytes instanceof Uint8Array ? bytes : undefined;
  }

  /** The 409 for a module the org has no room for (one it keeps already takes none); `inWrite` inside a `write`'s body. */
  refusal(orgId: string, upload: Pick<CompiledUpload, 'digest' | 'size'>, inWrite: boolean): SluiceError | undefined {
    if (this.#modules.doesExist([orgId, upload.digest])) return undefined;
    const held = this.#held(orgId, inWrite);
    const limit = this.#max;
    if (held + upload.size <= limit) return undefined;
    return new ConflictError('module_storage_limit_reached', `This organization's custom actions hold ${held} bytes of modules; a new one of ${upload.size} bytes would pass the ${limit} they may hold. Modules are kept for good: upload a new version of an action only when its module changed.`, { held_bytes: held, limit_bytes: limit });
  }

  /**
   * Stores an upload's bytes (the runner compiled them to this digest), also over a copy already
   * kept: uploading the file again is how a copy that went bad is repaired. Inside a `write`'s body,
   * after `refusal` said there is room; a module not kept before adds to the total.
   */
  put(orgId: string, module: CompiledUpload): void {
    const added = this.#modules.doesExist([orgId, module.digest]) ? 0 : module.size;
    const held = added === 0 ? undefined : this.#held(orgId, true);
    this.#modules.put([orgId, module.digest], Buffer.from(module.bytes.buffer, module.bytes.byteOffset, module.bytes.byteLength));
    if (held !== undefined) this.#heldBytes.set(orgId, held + added);
  }

  /** Runs `body` as one flushed transaction. One that did not commit may have counted a module it never stored: every org's total is read again when next needed. */
  write<T>(body: () => T): Promise<T> {
    this.#writing += 1;
    return durably(this.#root, this.#root.transaction(body))
      .catch((error: unknown) => {
        this.#heldBytes.clear();
        throw error;
      })
      .finally(() => {
        this.#writing -= 1;
      });
  }

  /**
   * The bytes of the modules the org's actions keep (those of versions uploaded before the runtime
   * kept bytes do not count until uploaded again). Read once from the org's versions (up to 50,000:
   * ~0.15 s), then kept up to date by `put`.
   */
  #held(orgId: string, inWrite: boolean): number {
    const known = this.#heldBytes.get(orgId);
    if (known !== undefined) return known;
    const sizes = new Map<string, number>();
    for (const { value } of this.#versions.getRange({ start: [orgId], end: [orgId, HIGH] })) {
      const version = value as ActionVersionRecord;
      sizes.set(version.digest, version.size);
    }
    let held = 0;
    for (const [digest, size] of sizes) if (this.#modules.doesExist([orgId, digest])) held += size;
    // A total read outside a write is kept only while none is under way: it may miss a write whose
    // step ran but has not committed, and would then stay short of what is stored.
    if (inWrite || this.#writing === 0) this.#heldBytes.set(orgId, held);
    return held;
  }
}
