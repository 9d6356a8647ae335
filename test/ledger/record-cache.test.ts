// The cached org and source reads: shared frozen records, the committed record while a write is in
// progress, the new one once it is durable, nothing after a delete; and the cache's bound.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RecordCache } from '../../runtime/ledger/record-cache.ts';
import type { SourceRecord } from '../../runtime/sources/source-record.ts';
import { SourceStore } from '../../runtime/sources/source-store.ts';
import { OrganizationStore, type Organization } from '../../runtime/tenancy/organizations.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const ORG: Organization = { id: 'acct-cache', name: 'Cache', plan: 'pro', max_concurrent_runs: 4, created_at: '2026-11-30T00:00:00.000Z' };
const SOURCE: SourceRecord = {
  org_id: 'acct-cache',
  name: 'billing',
  scheme: 'standard-webhooks',
  secrets: ['whsec_old'],
  environment: 'production',
  event_types: { 'order.paid': { type: 'object', required: ['id'] } },
  body_limit_bytes: 1024,
  created_at: '2026-11-30T00:00:00.000Z',
  updated_at: '2026-11-30T00:00:00.000Z',
};

for (const kind of LEDGER_KINDS) describe(`cached org and source reads (${kind.name} ledger)`, () => {
  let opened: ReturnType<typeof kind.open>;
  let orgs: OrganizationStore;
  let sources: SourceStore;
  before(async () => {
    opened = kind.open();
    orgs = new OrganizationStore(opened.ledger);
    sources = new SourceStore(opened.ledger);
    await orgs.create(ORG, () => undefined);
    await sources.create(SOURCE);
  });
  after(() => opened.close());

  test('readers share one frozen record, nested values included', () => {
    const first = sources.get(ORG.id, SOURCE.name);
    assert.deepEqual(first, SOURCE);
    assert.equal(sources.get(ORG.id, SOURCE.name), first);
    assert.throws(() => (first?.secrets as string[]).push('whsec_injected'), TypeError);
    assert.throws(() => Object.assign(orgs.get(ORG.id) ?? {}, { plan: 'enterprise' }), TypeError);
    assert.deepEqual(orgs.get(ORG.id), ORG);
  });

  test('during a write readers see the committed record; once it is durable, the new one', async () => {
    assert.equal(orgs.get(ORG.id)?.max_concurrent_runs, 4);
    const raised = orgs.update({ ...ORG, max_concurrent_runs: 9 });
    assert.equal(orgs.get(ORG.id)?.max_concurrent_runs, 4, 'not yet durable');
    await raised;
    assert.equal(orgs.get(ORG.id)?.max_concurrent_runs, 9);

    assert.deepEqual(sources.get(ORG.id, SOURCE.name)?.secrets, ['whsec_old']);
    const rotated = sources.replace({ ...SOURCE, secrets: ['whsec_new'], updated_at: '2026-11-30T01:00:00.000Z' });
    assert.deepEqual(sources.get(ORG.id, SOURCE.name)?.secrets, ['whsec_old'], 'not yet durable');
    await rotated;
    assert.deepEqual(sources.get(ORG.id, SOURCE.name)?.secrets, ['whsec_new'], 'a removed secret is gone once the change is acknowledged');
  });

  test('a deleted source reads as missing, and a source created under that name again is the new one', async () => {
    assert.notEqual(sources.get(ORG.id, SOURCE.name), undefined);
    await sources.delete(ORG.id, SOURCE.name);
    assert.equal(sources.get(ORG.id, SOURCE.name), undefined);
    await sources.create({ ...SOURCE, scheme: 'stripe', secrets: ['whsec_stripe'] });
    assert.equal(sources.get(ORG.id, SOURCE.name)?.scheme, 'stripe');
  });

  test('an org read before it existed is found once it is created', async () => {
    assert.equal(orgs.get('acct-later'), undefined);
    await orgs.create({ ...ORG, id: 'acct-later' }, () => undefined);
    assert.equal(orgs.get('acct-later')?.id, 'acct-later');
  });
});

test('the cache holds at most its capacity, dropping the oldest entry first', () => {
  const cache = new RecordCache<{ n: number }>(2);
  const loads: string[] = [];
  const read = (key: string) => cache.read(key, () => (loads.push(key), { n: loads.length }));
  read('a');
  read('b');
  read('a');
  assert.deepEqual(loads, ['a', 'b'], 'a second read of a cached key does not load');
  read('c');
  read('b');
  read('a');
  assert.deepEqual(loads, ['a', 'b', 'c', 'a'], 'c pushed out a, the oldest; b stayed');
});

test('a failed write still forgets its key, and a missing record is not cached', async () => {
  const cache = new RecordCache<{ v: string }>();
  let stored: { v: string } | undefined;
  const read = () => cache.read('k', () => stored);
  assert.equal(read(), undefined);
  stored = { v: 'one' };
  assert.deepEqual(read(), { v: 'one' });
  await assert.rejects(
    cache.writing('k', async () => {
      stored = { v: 'two' };
      throw new Error('disk full');
    }),
    /disk full/,
  );
  assert.deepEqual(read(), { v: 'two' });
});
