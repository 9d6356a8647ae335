// The layout version of the hook-runner's store (runner.mdb), so that a runner never reads a store a
// newer release wrote in a layout it does not know (it would misread it silently). Checked when the
// store opens, before anything else reads or writes it; stamped once the runner has opened it. A
// store without a stamp is from before the stamp existed (layout 1). The runtime's ledger has its
// own (runtime/ledger/data-format.ts); the runner imports no runtime code, so this is its twin.

import type { Database, DatabaseOptions, RootDatabase } from 'lmdb';
import { RunnerConfigError } from './runner-error.ts';

/**
 * The layout this release writes. Raise it with any change an older release would misread, with
 * the upgrade that makes it.
 *
 * 1: the databases store.ts opens: `modules` (digest -> module bytes, binary), `secrets` and
 * `secret-revisions` ((org, action, key) -> sealed value, and its revision mark; binary), `fences`
 * ((org, run) -> highest fence, a decimal string), `invocations` ((org, idempotency key) ->
 * InvocationRecord, msgpack), `fences-by-time` ((written at, org, run) -> that fence, a decimal
 * string) and `invocations-by-time` ((completed at, org, idempotency key) -> null, msgpack), and
 * this one's `data-format`. An invocation record holds a successful output; records of earlier
 * releases may lack `inputs` (matched on the digest alone) or hold traps and rejections, which
 * readers ignore.
 * 2: every invocation record has its `invocations-by-time` entry and every fence one in
 * `fences-by-time`, so pruning finds them: stores written before record pruning had none (the
 * upgrade from 1, store-upgrade.ts, adds them).
 * 3: `module-users` ((digest, org) -> null, msgpack) names the orgs that uploaded or called each
 * stored module, so that a forgotten org's modules no other org uses are removed: an earlier release
 * would store and call modules without it, and they would then be removed under an org that still
 * uses them. The upgrade
 * from 2 gives every module stored before it the user '' (unknown), which no org's removal takes.
 * (`forgotten-orgs`, org -> {at, done}, came in layout 2 without a number of its own: a release
 * that does not know it ignores it, and the runtime never sends such an org's calls.)
 */
export const RUNNER_STORE_FORMAT = 3;

const TABLE = 'data-format';
const KEY = 'version';

/** The stamp's table, created if missing: open it only once the store's format is known. */
export const openStoreFormatTable = (root: RootDatabase): Database<number, string> =>
  root.openDB<number, string>({ name: TABLE, encoding: 'msgpack' });

/**
 * The layout the store was last stamped with: 1 for one from before the stamp existed. Reads
 * without writing: a store that has no stamp table is not given one here.
 */
export function storedRunnerStoreFormat(root: RootDatabase): number {
  // lmdb-js answers undefined for a named database that `create: false` does not find (its typings omit both).
  const existing = { name: TABLE, encoding: 'msgpack', create: false } as DatabaseOptions & { name: string };
  return stampIn(root.openDB<number, string>(existing) as Database<number, string> | undefined);
}

/** The layout the stamp table holds: 1 without a table or a stamp (from before the stamp existed). */
export function stampIn(table: Database<number, string> | undefined): number {
  const stored = table?.get(KEY);
  return typeof stored === 'number' ? stored : 1;
}

/** Refuses (RunnerConfigError: exit 2, no restart) a store written in a newer layout than this release knows. */
export function assertRunnerStoreFormatKnown(root: RootDatabase, dir: string): void {
  const stored = storedRunnerStoreFormat(root);
  if (stored > RUNNER_STORE_FORMAT) {
    throw new RunnerConfigError(
      `${dir} holds a hook-runner store written by a newer Sluice (store format ${stored}; this release reads up to ${RUNNER_STORE_FORMAT}). ` +
        'Run that release or a newer one on it, or start this one on another data dir.',
    );
  }
}

/**
 * Records that the store is in this release's layout (after its upgrades, once there are any); resolves
 * once durable, with the layout it replaced (1 for none), or undefined when it was this release's already.
 */
export async function stampRunnerStoreFormat(store: { readonly dataFormat: Database<number, string>; durable<T>(write: Promise<T>): Promise<T> }): Promise<number | undefined> {
  const stamped = store.dataFormat.get(KEY);
  if (stamped === RUNNER_STORE_FORMAT) return undefined;
  await store.durable(store.dataFormat.put(KEY, RUNNER_STORE_FORMAT));
  return typeof stamped === 'number' ? stamped : 1;
}
