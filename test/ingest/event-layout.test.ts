// The on-disk layout of events and recordings, read back through the real EventStore on LMDB in a
// temp dir: payloads kept as their JSON text, a webhook body stored once, older records still read.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { generateEventId, type Recording, type StoredEvent } from '../../runtime/events/event-record.ts';
import { EventStore } from '../../runtime/events/event-store.ts';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import { asBinary, open } from 'lmdb';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { tempDir } from '../helpers/runtime.ts';

let dir: string;
let ledger: Ledger;
let store: EventStore;
const AT = Date.UTC(2026, 10, 30, 12);

before(() => {
  dir = tempDir();
  ledger = openLedger(dir);
  store = new EventStore(ledger, new Inbox(ledger, 60_000));
});
after(async () => {
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
});

const eventOf = (payload: unknown, id = generateEventId(AT)): StoredEvent => ({
  id, org_id: 'org_a', type: 'order.paid', payload, environment: 'production', source: 'shop', provider_event_id: id,
  received_at: new Date(AT).toISOString(), received_at_ms: AT, correlation_id: id, causation_id: null, depth: 0, replay_skip_side_effects: false, replay_workflow_ids: null,
});

const recordingOf = (body: string, truncated = false): Recording => ({
  method: 'POST', path: '/hooks/org_a/shop', headers: { 'content-type': 'application/json' }, body, body_bytes: body.length, body_truncated: truncated,
  verifier: { scheme: 'standard-webhooks', key_index: 0 }, received_at: new Date(AT).toISOString(),
});

const raw = (db: 'events' | 'recordings', id: string): Record<string, unknown> => ledger[db].get(['org_a', id]) as Record<string, unknown>;

test('a webhook payload is stored as the exact text received, and its body once', async () => {
  // Spacing and key order that a re-serialization would not keep.
  const body = '{ "id":"msg_1",  "type":"order.paid", "total": 12.50, "lines":[{"sku":"a"}] }';
  const event = eventOf(JSON.parse(body));
  await store.store({ event, payloadJson: body, recording: recordingOf(body), claim: { source: 'shop', providerEventId: 'msg_1' } });

  assert.equal(raw('events', event.id)['payload_json'], body);
  assert.equal('payload' in raw('events', event.id), false);
  assert.equal(raw('recordings', event.id)['body_is_payload'], true);
  assert.equal('body' in raw('recordings', event.id), false);

  assert.deepEqual(store.get('org_a', event.id), event);
  assert.deepEqual(store.recording('org_a', event.id), recordingOf(body));
});

test('events without their text are serialized; a recording that differs from the payload keeps its body', async () => {
  const event = eventOf({ n: 1, nested: { ok: true } });
  const cut = '{"n":1,"nested":{"ok":tr';
  await store.store({ event, recording: recordingOf(cut, true), claim: null });
  assert.equal(raw('events', event.id)['payload_json'], '{"n":1,"nested":{"ok":true}}');
  assert.equal(raw('recordings', event.id)['body'], cut);
  assert.deepEqual(store.get('org_a', event.id), event);
  assert.deepEqual(store.recording('org_a', event.id), recordingOf(cut, true));
});

test('a null payload and events written in the older layout read back unchanged', async () => {
  const empty = eventOf(null);
  await store.store({ event: empty, recording: null, claim: null });
  assert.deepEqual(store.get('org_a', empty.id), empty);

  const older = eventOf({ kept: 'as an object' });
  await ledger.events.put(['org_a', older.id], older);
  await ledger.recordings.put(['org_a', older.id], recordingOf('{"kept":"as an object"}'));
  assert.deepEqual(store.get('org_a', older.id), older);
  assert.deepEqual(store.recording('org_a', older.id), recordingOf('{"kept":"as an object"}'));
  assert.equal(store.has('org_a', older.id), true);
  // Written before replays could name workflows: it reads as a replay of every listener would (null).
  const { replay_workflow_ids: _added, ...beforeTheField } = eventOf({ n: 2 });
  await ledger.events.put(['org_a', beforeTheField.id], { ...beforeTheField, payload_json: '{"n":2}' });
  assert.equal(store.get('org_a', beforeTheField.id)?.replay_workflow_ids, null);
  assert.equal(store.getRecord('org_a', beforeTheField.id)?.replay_workflow_ids, null);
  assert.equal(store.has('org_a', 'evt_missing'), false);
});

test('getRecord hands the payload on as its stored text, unparsed, in either layout', async () => {
  const body = '{ "id":"msg_2", "big": 820982911946154508, "total": 1e400 }';
  const event = eventOf(JSON.parse(body));
  await store.store({ event, payloadJson: body, recording: null, claim: { source: 'shop', providerEventId: 'msg_2' } });
  const { payload: _parsed, ...fields } = event;
  // The text as received: a parse and re-serialization would lose its spacing and its numbers.
  assert.deepEqual(store.getRecord('org_a', event.id), { ...fields, payload_json: body });

  const older = eventOf({ kept: 'as an object', n: [1, 2] });
  await ledger.events.put(['org_a', older.id], older);
  const { payload: olderPayload, ...olderFields } = older;
  assert.deepEqual(store.getRecord('org_a', older.id), { ...olderFields, payload_json: JSON.stringify(olderPayload) });

  const empty = eventOf(null);
  await ledger.events.put(['org_a', empty.id], empty);
  assert.equal(store.getRecord('org_a', empty.id)?.payload_json, 'null');
  assert.equal(store.getRecord('org_a', 'evt_missing'), undefined);
});

test('values written by the earlier encoder (msgpack records, no shared structures) still read', async () => {
  // The earlier code opened its databases with lmdb-js defaults: encode the same way in a scratch env.
  const oldDir = tempDir();
  const oldEnv = open({ path: oldDir, compression: false });
  const older = eventOf({ nested: { list: [1, 2, 3], text: 'é' } });
  await oldEnv.put(['bytes'], older);
  const bytes = oldEnv.getBinary(['bytes']);
  await oldEnv.close();
  rmSync(oldDir, { recursive: true, force: true });
  assert.ok(bytes !== undefined);

  await ledger.events.put(['org_a', older.id], asBinary(bytes));
  assert.deepEqual(store.get('org_a', older.id), older);
});
