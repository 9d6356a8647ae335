// The device store's reads come from a cache (each device message reads its device twice, and a
// device may declare ~1 MB of schemas): the same decoded record until a write of its org, which
// every read sees once it is made, also a write inside a caller's transaction (a sandbox reset).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventStore } from '../../runtime/events/event-store.ts';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { DeviceRecord } from '../../runtime/triggers/device-record.ts';
import { DeviceStore } from '../../runtime/triggers/device-store.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const T0 = Date.UTC(2026, 11, 3);
const device = (name: string): DeviceRecord => ({
  id: `dev_${name}`,
  org_id: 'acct-a',
  name,
  environment: 'sandbox',
  token_hash: 'h1',
  token_prefix: 'sdt_1',
  event_types: { reading: { type: 'object' } },
  created_at: new Date(T0).toISOString(),
  updated_at: new Date(T0).toISOString(),
  connection: null,
  last_disconnected_at: null,
  last_disconnect_reason: null,
});

for (const kind of LEDGER_KINDS) {
  test(`device reads are cached until a write of the org, which they then see (${kind.name} ledger)`, async () => {
    const { ledger, close } = kind.open();
    try {
      const devices = new DeviceStore(ledger, new EventStore(ledger, new Inbox(ledger, 60_000)));
      await devices.create(device('gate-1'));
      const first = devices.get('acct-a', 'gate-1');
      assert.equal(devices.get('acct-a', 'gate-1'), first, 'the same decoded record, not decoded again');
      assert.ok(Object.isFrozen(first?.event_types), 'shared, so frozen');
      await devices.rotateToken('acct-a', 'gate-1', 'dev_gate-1', 'h2', 'sdt_2', T0 + 1);
      assert.equal(devices.get('acct-a', 'gate-1')?.token_hash, 'h2');
      const connection = { id: 'con_1', connected_at_ms: T0 + 2 };
      assert.equal(await devices.connect(devices.get('acct-a', 'gate-1')!, connection, () => ({ reason: 'replaced', code: null })), true);
      assert.equal(devices.get('acct-a', 'gate-1')?.connection?.id, 'con_1');
      // A write inside a caller's transaction, as a sandbox reset makes it.
      const { root } = ledger;
      await devices.writing('acct-a', () => durably(root, root.transaction(() => devices.endConnectionsWithin('acct-a', [{ name: 'gate-1', id: 'dev_gate-1' }], 'sandbox_reset', T0 + 3))));
      assert.equal(devices.get('acct-a', 'gate-1')?.connection, null);
      assert.equal(devices.get('acct-a', 'gate-1')?.last_disconnect_reason, 'sandbox_reset');
      await devices.delete('acct-a', 'gate-1', 'dev_gate-1', () => ({ reason: 'device_deleted', code: null }), T0 + 4);
      assert.equal(devices.get('acct-a', 'gate-1'), undefined);
    } finally {
      close();
    }
  });
}

for (const kind of LEDGER_KINDS) {
  test(`a sandbox reset's end of connections leaves alone a device made again under the name, or in production (${kind.name} ledger)`, async () => {
    const { ledger, close } = kind.open();
    try {
      const devices = new DeviceStore(ledger, new EventStore(ledger, new Inbox(ledger, 60_000)));
      const { root } = ledger;
      await devices.create({ ...device('remade'), id: 'dev_remade_2' });
      await devices.create({ ...device('plant'), environment: 'production' });
      await devices.create(device('lab'));
      for (const [name, index] of [['remade', 1], ['plant', 2], ['lab', 3]] as const) {
        assert.equal(await devices.connect(devices.head('acct-a', name)!, { id: `con_${index}`, connected_at_ms: T0 + index }, () => ({ reason: 'replaced', code: null })), true);
      }
      // As read before the reset's writes: `remade` was another device then; `plant` is production now.
      const read = [{ name: 'remade', id: 'dev_remade' }, { name: 'plant', id: 'dev_plant' }, { name: 'lab', id: 'dev_lab' }];
      const ended = await devices.writing('acct-a', () => durably(root, root.transaction(() => devices.endConnectionsWithin('acct-a', read, 'sandbox_reset', T0 + 9))));
      assert.deepEqual(ended, ['con_3']);
      assert.deepEqual(['remade', 'plant', 'lab'].map((name) => devices.head('acct-a', name)?.connection?.id ?? null), ['con_1', 'con_2', null]);
    } finally {
      close();
    }
  });
}

test('devices are stored with their schemas as JSON text; one stored before (schemas as objects) reads alike and is rewritten as text when its connection changes', async () => {
  const { ledger, close } = LEDGER_KINDS[0]!.open();
  try {
    const devices = new DeviceStore(ledger, new EventStore(ledger, new Inbox(ledger, 60_000)));
    const table = ledger.openDatabase('devices');
    const schemas = { reading: { type: 'object', required: ['celsius'] } };
    await devices.create({ ...device('new'), event_types: schemas });
    const stored = table.get(['acct-a', 'new']) as Record<string, unknown>;
    assert.deepEqual([typeof stored['event_types_json'], stored['event_types']], ['string', undefined]);
    assert.deepEqual(JSON.parse(stored['event_types_json'] as string), schemas);
    const { event_types: _schemas, ...head } = { ...device('old'), event_types: schemas };
    await durably(ledger.root, ledger.root.transaction(() => table.put(['acct-a', 'old'], { ...head, event_types: schemas })));
    assert.deepEqual(devices.get('acct-a', 'old')?.event_types, schemas);
    assert.equal(devices.head('acct-a', 'old')?.token_hash, 'h1');
    assert.equal('event_types' in (devices.head('acct-a', 'old') ?? {}), false, 'a head holds no schemas');
    assert.equal(await devices.connect(devices.head('acct-a', 'old')!, { id: 'con_1', connected_at_ms: T0 }, () => ({ reason: 'replaced', code: null })), true);
    const rewritten = table.get(['acct-a', 'old']) as Record<string, unknown>;
    assert.deepEqual([JSON.parse(rewritten['event_types_json'] as string), rewritten['event_types']], [schemas, undefined]);
    assert.deepEqual(devices.get('acct-a', 'old')?.event_types, schemas);
  } finally {
    close();
  }
});
