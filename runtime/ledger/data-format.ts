// The layout version of a data dir's ledger, so that a release never reads data a newer one wrote
// in a layout it does not know (it would misread it silently: an older release finds no failed
// events in a dir whose index a newer one moved). A release checks it at boot, before anything
// else reads the ledger, and stamps its own once its upgrades are done. A dir without a stamp is
// from before the stamp existed (layout 1).

import { InputError } from '../errors.ts';
import { durably } from './durable-write.ts';
import type { Ledger } from './ledger.ts';

/**
 * The layout this release writes. 2: failed events indexed by arrival (failed-index-upgrade.ts).
 * 3: workflows indexed by creation (WorkflowStore.indexOrder; an older release would leave a
 * workflow it creates unlisted). Raise it with any change an older release would misread, with
 * the upgrade that makes it. 4: business replays indexed under their event (replay-index.ts; an
 * older release would leave a replay it makes unlisted, and its double click unguarded). 5: projection
 * rows indexed by status (ProjectionStore.indexStatuses; an older release would leave a row's status
 * index behind when it changes the status). Format 5 also covers runs-by-time entries holding the
 * run's workflow and state (run-time-index.ts), which came in the same release: an older one would
 * leave an entry's state behind when the run moves on, and list filters trust it. No upgrade is
 * needed for them: a format-4 release wrote null entries, which say nothing and are read through.
 * 6: deleted workflows listed until their versions are pruned (workflows/deleted-workflows.ts; an
 * older release would delete a workflow without listing it, and its versions would stay for good).
 * 7: device schemas stored as JSON text (StoredDevice in triggers/device-record.ts; an older release
 * would read such a device as declaring none). No upgrade: records in the older form are read as
 * they are, and rewritten in the new one when their connection next changes.
 * 8: source schemas stored as JSON text (StoredSource in sources/source-record.ts; an older release
 * would read such a source as declaring none). No upgrade: records in the older form are read as
 * they are, and rewritten in the new one when the source is next updated.
 * 9: appended projection rows indexed by creation time and each org's rows counted
 * (ProjectionStore.countRows; an older release would add and remove rows without counting them or
 * indexing them for retention).
 * 10: deleted organizations (tenancy/deleted-orgs.ts; an older release, not knowing the table, would
 * resume a deleted org's unfinished runs, sending their steps, and give the retired id out again).
 * No upgrade: a dir without the table has no deleted org.
 */
export const DATA_FORMAT = 10;

const TABLE = 'data-format';
const KEY = 'version';

/** The layout a data dir was last stamped with: 1 for a dir from before the stamp existed. */
export function storedDataFormat(ledger: Ledger): number {
  const stored = ledger.openDatabase(TABLE).get(KEY);
  return typeof stored === 'number' ? stored : 1;
}

/** Refuses (invalid_config, at boot) a data dir written in a newer layout than this release knows. */
export function assertDataFormatKnown(ledger: Ledger, dataDir: string): void {
  const stored = storedDataFormat(ledger);
  if (stored > DATA_FORMAT) {
    throw new InputError(400, 'invalid_config', `${dataDir} was written by a newer Sluice (data format ${stored}; this release reads up to ${DATA_FORMAT}). Run that release or a newer one on it, or start this one on another data dir.`);
  }
}

/**
 * Records that the ledger is in this release's layout (after its upgrades have run); resolves once
 * durable, with the layout it replaced (1 for none), or undefined when it was this release's already.
 */
export async function stampDataFormat(ledger: Ledger): Promise<number | undefined> {
  const table = ledger.openDatabase(TABLE);
  const stamped = table.get(KEY);
  if (stamped === DATA_FORMAT) return undefined;
  await durably(ledger.root, ledger.root.transaction(() => table.put(KEY, DATA_FORMAT)));
  return typeof stamped === 'number' ? stamped : 1;
}
