// Records written by earlier versions, which lack fields added since, read as this version means
// them: a starter org stored before the ingest quota gets its plan's rate (not unlimited) and no byte quota, and a
// device registered before devices declared schemas stores messages (it declares none).

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';

const dataDir = tempDir('sluice-older-');
after(() => rmSync(dataDir, { recursive: true, force: true }));

test('an org without ingest_rate_per_second and a device without event_types, as earlier versions stored them', { skip: process.env['SLUICE_TEST_LEDGER'] === 'memory' && 'reopens an LMDB data dir' }, async () => {
  let rt = await startRuntime({ dataDir });
  const starter = await createOrg(rt.url, ADMIN_TOKEN, 'acct-older', 'starter');
  const created = await call(rt.url, 'POST', '/organizations/acct-older/devices', { token: starter, json: { name: 'thermo-1' } });
  assert.equal(created.status, 201, created.text);
  await rt.close();

  // Take the fields away, as the versions before them wrote these records.
  const ledger = openLedger(dataDir);
  const devices = ledger.openDatabase('devices');
  const { ingest_rate_per_second: _rate, ingest_bytes_per_second: _bytes, ...olderOrg } = ledger.orgs.get(['acct-older']) as Record<string, unknown>;
  const { event_types: _types, ...olderDevice } = devices.get(['acct-older', 'thermo-1']) as Record<string, unknown>;
  await durably(ledger.root, ledger.root.transaction(() => {
    ledger.orgs.put(['acct-older'], olderOrg);
    devices.put(['acct-older', 'thermo-1'], olderDevice);
  }));
  await ledger.close();

  rt = await startRuntime({ dataDir });
  try {
    const older = (await call(rt.url, 'GET', '/organizations/acct-older', { token: starter })).body.organization;
    assert.equal(older.ingest_rate_per_second, 100, "the starter plan's rate");
    assert.equal(older.ingest_bytes_per_second, null, 'no byte quota');
    // A change writes the record as this version reads it: the fields it lacked are there after it.
    const renamed = await call(rt.url, 'PATCH', '/organizations/acct-older', { token: ADMIN_TOKEN, json: { name: 'Renamed' } });
    assert.deepEqual([renamed.body.organization.ingest_rate_per_second, renamed.body.organization.ingest_bytes_per_second], [100, null]);
    const answers = await Promise.all(Array.from({ length: 150 }, () => call(rt.url, 'POST', '/organizations/acct-older/events', { token: starter, json: { type: 'a.b', payload: {} } })));
    assert.ok(answers.some((answer) => answer.status === 429), 'past 100 events at once, the quota answers 429');
    assert.deepEqual((await call(rt.url, 'GET', '/organizations/acct-older/devices/thermo-1', { token: starter })).body.device.event_types, {});
    const device = await connectDevice(rt.url, 'acct-older', 'thermo-1', created.body.token);
    await device.waitFor(() => device.frames.some((frame) => frame.type === 'ready'), 'ready');
    device.send({ id: 'm-1', type: 'door.opened' });
    await device.waitFor(() => device.frames.some((frame) => frame.id === 'm-1'), 'the answer to m-1');
    assert.equal(device.frames.find((frame) => frame.id === 'm-1')?.type, 'ack', JSON.stringify(device.frames));
    device.close();
    await device.closed;
  } finally {
    await rt.close();
  }
});
