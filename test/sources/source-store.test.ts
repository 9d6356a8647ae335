// How the source store keeps a source's schemas: as JSON text (data format 8), so a head read
// decodes one string. A record an older release stored (schemas as objects, or none at all) reads
// alike through every reader, and the store writes it in the new form when the source is next updated.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { SourceRecord } from '../../runtime/sources/source-record.ts';
import { SourceStore } from '../../runtime/sources/source-store.ts';
import { LMDB_LEDGER } from '../helpers/ledgers.ts';

const ORG = 'acct-stored-sources';
const SCHEMAS = { 'order.paid': { type: 'object', required: ['id'], properties: { amount: { type: 'number', minimum: 0.5 } } } };
const source = (name: string): SourceRecord => ({
  org_id: ORG,
  name,
  scheme: 'standard-webhooks',
  secrets: ['whsec_one'],
  environment: 'sandbox',
  event_types: SCHEMAS,
  body_limit_bytes: 2048,
  created_at: '2026-12-05T00:00:00.000Z',
  updated_at: '2026-12-05T00:00:00.000Z',
});

test('a new source is stored with its schemas as JSON text, and reads back with them parsed', async () => {
  const { ledger, close } = LMDB_LEDGER.open();
  try {
    const sources = new SourceStore(ledger, new Inbox(ledger, 60_000));
    await sources.create(source('fresh'));
    const stored = ledger.sources.get([ORG, 'fresh']) as Record<string, unknown>;
    assert.deepEqual([typeof stored['event_types_json'], 'event_types' in stored], ['string', false]);
    assert.deepEqual(JSON.parse(stored['event_types_json'] as string), SCHEMAS);
    assert.deepEqual(sources.get(ORG, 'fresh'), source('fresh'));
    const { event_types: _schemas, ...head } = source('fresh');
    assert.deepEqual(sources.head(ORG, 'fresh'), head, 'a head holds neither the schemas nor their text');
    const updated = await sources.update(ORG, 'fresh', (current) => ({ ...current, event_types: {}, updated_at: '2026-12-05T01:00:00.000Z' }));
    assert.deepEqual(updated.event_types, {});
    assert.equal((ledger.sources.get([ORG, 'fresh']) as Record<string, unknown>)['event_types_json'], '{}');
  } finally {
    await close();
  }
});

test('a source stored before data format 8 (schemas as objects) reads alike everywhere, and its next update stores it as text', async () => {
  const { ledger, close } = LMDB_LEDGER.open();
  try {
    const sources = new SourceStore(ledger, new Inbox(ledger, 60_000));
    const { event_types: _schemas, ...head } = source('older');
    // As an older release wrote them: one with its schemas as objects, one from before sources declared any.
    await durably(ledger.root, ledger.root.transaction(() => {
      ledger.sources.put([ORG, 'older'], { ...head, event_types: SCHEMAS });
      ledger.sources.put([ORG, 'oldest'], { ...head, name: 'oldest' });
    }));

    assert.deepEqual(sources.get(ORG, 'older'), source('older'));
    assert.deepEqual(sources.head(ORG, 'older'), head);
    assert.deepEqual(sources.get(ORG, 'oldest')?.event_types, {});
    assert.deepEqual([...sources.listAfter(ORG, undefined)].map((read) => [read.name, read.event_types]), [['older', SCHEMAS], ['oldest', {}]]);
    assert.deepEqual([...sources.all()].map((read) => [read.name, read.event_types]), [['older', SCHEMAS], ['oldest', {}]]);
    const heads = [];
    for await (const read of sources.headsInTurns(ORG)) heads.push(read);
    assert.deepEqual(heads, [head, { ...head, name: 'oldest' }]);

    await sources.update(ORG, 'older', (current) => ({ ...current, secrets: ['whsec_two'], updated_at: '2026-12-05T01:00:00.000Z' }));
    const rewritten = ledger.sources.get([ORG, 'older']) as Record<string, unknown>;
    assert.deepEqual([JSON.parse(rewritten['event_types_json'] as string), 'event_types' in rewritten], [SCHEMAS, false]);
    assert.deepEqual(sources.get(ORG, 'older'), { ...source('older'), secrets: ['whsec_two'], updated_at: '2026-12-05T01:00:00.000Z' });
    await sources.update(ORG, 'oldest', (current) => ({ ...current, updated_at: '2026-12-05T01:00:00.000Z' }));
    assert.equal((ledger.sources.get([ORG, 'oldest']) as Record<string, unknown>)['event_types_json'], '{}');

    await sources.delete(ORG, 'older', (stored) => stored.created_at === head.created_at);
    assert.equal(sources.get(ORG, 'older'), undefined);
  } finally {
    await close();
  }
});
