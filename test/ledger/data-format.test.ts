// A data dir carries the layout version of the release that last wrote it: a fresh or older dir
// is stamped with this release's, and one written by a newer release is refused at boot, naming
// both versions, instead of being misread. An upgrade of a dir that held data says so once in the
// log (an earlier release must not open it from then on); a new dir's first stamp says nothing.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { DATA_FORMAT } from '../../runtime/ledger/data-format.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { capturedLog } from '../helpers/captured-log.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';
import { createOrg } from '../helpers/http.ts';

const formatIn = async (dataDir: string, write?: number): Promise<unknown> => {
  const ledger = openLedger(dataDir);
  try {
    const table = ledger.openDatabase('data-format');
    if (write !== undefined) await ledger.root.transaction(() => table.put('version', write));
    return table.get('version');
  } finally {
    await ledger.close();
  }
};

test('a data dir is stamped with this release\'s format, and one from a newer release is refused at boot', async () => {
  const dataDir = tempDir();
  try {
    await (await startRuntime({ dataDir })).close();
    assert.equal(await formatIn(dataDir), DATA_FORMAT);
    await formatIn(dataDir, DATA_FORMAT + 1);
    // A start that wrongly succeeds is closed again, so a failure here cannot leave the test running.
    const refusal = await startRuntime({ dataDir }).then(async (rt) => void (await rt.close()), (error: Error) => error);
    assert.match(String(refusal?.message), new RegExp(`written by a newer Sluice \\(data format ${DATA_FORMAT + 1}; this release reads up to ${DATA_FORMAT}\\)`));
    assert.equal(await formatIn(dataDir), DATA_FORMAT + 1, 'the refusal left the stamp as it was');
    await formatIn(dataDir, DATA_FORMAT - 1);
    await (await startRuntime({ dataDir })).close();
    assert.equal(await formatIn(dataDir), DATA_FORMAT, 'an older dir is upgraded and stamped');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('an upgrade of a dir that held data is said once in the log; a new dir stamped for the first time says nothing', async () => {
  const dataDir = tempDir();
  const upgradeLines = (lines: ReadonlyArray<{ message: string }>) => lines.filter((line) => line.message.startsWith('data dir upgraded'));
  try {
    const fresh = capturedLog();
    const rt = await startRuntime({ dataDir, logger: fresh.logger });
    try {
      await createOrg(rt.url, ADMIN_TOKEN, 'acct-upgraded');
    } finally {
      await rt.close();
    }
    assert.deepEqual(upgradeLines(fresh.lines), [], 'a new dir is no upgrade');

    await formatIn(dataDir, DATA_FORMAT - 1);
    const upgraded = capturedLog();
    await (await startRuntime({ dataDir, logger: upgraded.logger })).close();
    assert.deepEqual(upgradeLines(upgraded.lines), [{ level: 'info', message: "data dir upgraded to this release's layout; do not start an earlier release on it (to go back, restore a copy taken before this start)" }]);
    const again = capturedLog();
    await (await startRuntime({ dataDir, logger: again.logger })).close();
    assert.deepEqual(upgradeLines(again.lines), [], 'not said again');

    // A dir from before the stamp (none): it holds an org, so it is no new dir.
    const ledger = openLedger(dataDir);
    await ledger.root.transaction(() => ledger.openDatabase('data-format').remove('version'));
    await ledger.close();
    const unstamped = capturedLog();
    await (await startRuntime({ dataDir, logger: unstamped.logger })).close();
    assert.equal(upgradeLines(unstamped.lines).length, 1, 'a dir from before the stamp is upgraded too');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
