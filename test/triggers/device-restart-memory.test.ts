// A start ends every device connection the previous process left open. A device may declare ~1 MB
// of schemas (several MB once decoded), and an org may hold 1,000 devices: the start must decode
// them one at a time. Here 48 such devices, every one left connected, are ended by a process whose
// heap (128 MB) holds far fewer of them decoded at once.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import type { DeviceRecord } from '../../runtime/triggers/device-record.ts';
import { ROOT } from '../helpers/runtime.ts';

const T0 = Date.UTC(2026, 11, 4);
const DEVICES = 48;

/** ~1 MB of JSON Schema: 16 types whose annotations hold 7,400 small objects each. */
function heavySchemas(): Record<string, object> {
  const types: Record<string, object> = {};
  for (let t = 0; t < 16; t++) types[`type.${t}`] = { type: 'object', examples: Array.from({ length: 7_400 }, (_, i) => ({ x: i % 10 })) };
  return types;
}

function connectedDevice(index: number, eventTypes: Record<string, object>): DeviceRecord {
  return {
    id: `dev_${index}`,
    org_id: 'acct-heavy',
    name: `gate-${index}`,
    environment: 'production',
    token_hash: `hash-${index}`,
    token_prefix: 'sdt_x',
    event_types: eventTypes,
    created_at: new Date(T0).toISOString(),
    updated_at: new Date(T0).toISOString(),
    connection: { id: `con_${index}`, connected_at_ms: T0 },
    last_disconnected_at: null,
    last_disconnect_reason: null,
  };
}

test(`a start ends ${DEVICES} connections of devices holding ~1 MB of schemas each, within a 128 MB heap`, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sluice-device-restart-'));
  try {
    const ledger = openLedger(dataDir);
    const eventTypes = heavySchemas();
    assert.ok(JSON.stringify(eventTypes).length > 900_000, 'each device holds about a megabyte of schemas');
    const table = ledger.openDatabase('devices');
    for (let index = 0; index < DEVICES; index++) {
      await durably(ledger.root, ledger.root.transaction(() => table.put(['acct-heavy', `gate-${index}`], connectedDevice(index, eventTypes))));
    }
    await ledger.close();

    const run = promisify(execFile);
    const child = join(ROOT, 'test/helpers/device-restart-child.ts');
    const { stdout } = await run(process.execPath, ['--max-old-space-size=128', '--import', 'tsx', child, dataDir, String(T0 + 60_000)], { cwd: ROOT });
    assert.equal(stdout.trim(), String(DEVICES), 'every connection left open was ended');

    const reopened = openLedger(dataDir);
    try {
      const devices = reopened.openDatabase('devices');
      for (let index = 0; index < DEVICES; index++) {
        const { connection, last_disconnect_reason } = devices.get(['acct-heavy', `gate-${index}`]) as DeviceRecord;
        assert.deepEqual([connection, last_disconnect_reason], [null, 'runtime_restarted'], `gate-${index}`);
      }
    } finally {
      await reopened.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
