// The cached org, source and trigger-match reads: shared frozen records, the committed record while
// a write is in progress, the new one once it is durable, nothing after a delete; and the cache's bound.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import { RecordCache } from '../../runtime/ledger/record-cache.ts';
import type { SourceRecord } from '../../runtime/sources/source-record.ts';
import { SourceStore } from '../../runtime/sources/source-store.ts';
import { OrganizationStore, type Organization } from '../../runtime/tenancy/organizations.ts';
import { parseWorkflowInput } from '../../runtime/workflows/parse-workflow.ts';
import { WorkflowStore } from '../../runtime/workflows/workflow-store.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const ORG: Organization = { id: 'acct-cache', name: 'Cache', plan: 'pro', max_concurrent_runs: 4, ingest_rate_per_second: null, ingest_bytes_per_second: null, created_at: '2026-11-30T00:00:00.000Z', updated_at: '2026-11-30T00:00:00.000Z' };
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
  let workflows: WorkflowStore;
  before(async () => {
    opened = kind.open();
    orgs = new OrganizationStore(opened.ledger);
    sources = new SourceStore(opened.ledger, new Inbox(opened.ledger, 60_000));
    workflows = new WorkflowStore(opened.ledger);
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
    const raised = orgs.update(ORG.id, (stored) => ({ ...stored, max_concurrent_runs: 9 }));
    assert.equal(orgs.get(ORG.id)?.max_concurrent_runs, 4, 'not yet durable');
    await raised;
    assert.equal(orgs.get(ORG.id)?.max_concurrent_runs, 9);

    assert.deepEqual(sources.get(ORG.id, SOURCE.name)?.secrets, ['whsec_old']);
    const rotated = sources.update(ORG.id, SOURCE.name, (stored) => ({ ...stored, secrets: ['whsec_new'], updated_at: '2026-11-30T01:00:00.000Z' }));
    assert.deepEqual(sources.get(ORG.id, SOURCE.name)?.secrets, ['whsec_old'], 'not yet durable');
    await rotated;
    assert.deepEqual(sources.get(ORG.id, SOURCE.name)?.secrets, ['whsec_new'], 'a removed secret is gone once the change is acknowledged');
  });

  test('a deleted source reads as missing, and a source created under that name again is the new one', async () => {
    assert.notEqual(sources.get(ORG.id, SOURCE.name), undefined);
    const deleting = sources.delete(ORG.id, SOURCE.name, () => true);
    // At once, not when durable: a delivery checked meanwhile would write a claim behind the delete's.
    assert.equal(sources.get(ORG.id, SOURCE.name), undefined, 'gone from the moment the delete starts');
    await deleting;
    assert.equal(sources.get(ORG.id, SOURCE.name), undefined);
    await sources.create({ ...SOURCE, scheme: 'stripe', secrets: ['whsec_stripe'] });
    assert.equal(sources.get(ORG.id, SOURCE.name)?.scheme, 'stripe');
  });

  test('trigger matches follow workflow writes; an ingest-like transaction queued right after a write sees it', async () => {
    const draft = parseWorkflowInput({ name: 'wf', trigger_event: 'order.paid', steps: [{ type: 'webhook', url: 'https://example.com/hook' }] });
    const matching = () => workflows.matching(ORG.id, 'production', 'order.paid').map((v) => v.workflow_id);
    const { root } = opened.ledger;
    assert.deepEqual(matching(), [], 'nothing listens yet (and that answer is cached)');
    const creating = workflows.create(draft, ORG.id, 0);
    assert.deepEqual(matching(), [], 'not committed yet');
    // Ordered after the workflow's commit: on LMDB it runs before that commit is flushed.
    const seenByLaterTransaction = await root.transaction(() => matching());
    const { workflow } = await creating;
    assert.deepEqual(seenByLaterTransaction, [workflow.id]);
    assert.deepEqual(matching(), [workflow.id]);
    const disabling = workflows.setStatus(ORG.id, workflow.id, 'disabled', 1);
    assert.deepEqual(matching(), [workflow.id], 'not committed yet');
    assert.deepEqual(await root.transaction(() => matching()), []);
    await disabling;
    assert.deepEqual(matching(), []);
    assert.throws(() => (workflows.matching(ORG.id, 'production', 'order.paid') as unknown[]).push(1), TypeError, 'shared answers are frozen');
  });

  test('an org change is seen by a transaction queued right after it', async () => {
    const before = orgs.get(ORG.id)?.max_concurrent_runs ?? 0;
    const raising = orgs.update(ORG.id, (stored) => ({ ...stored, max_concurrent_runs: before + 1 }));
    assert.equal(orgs.get(ORG.id)?.max_concurrent_runs, before, 'not committed yet');
    assert.equal(await opened.ledger.root.transaction(() => orgs.get(ORG.id)?.max_concurrent_runs), before + 1);
    await raising;
  });

  test('an org read before it existed is found once it is created', async () => {
    assert.equal(orgs.get('acct-later'), undefined);
    await orgs.create({ ...ORG, id: 'acct-later' }, () => undefined);
    assert.equal(orgs.get('acct-later')?.id, 'acct-later');
  });
});

test('the cache holds at most its capacity, dropping the org cached first', () => {
  const cache = new RecordCache<{ n: number }>(3);
  const loads: string[] = [];
  const read = (orgId: string, key: string) => cache.read(orgId, key, () => (loads.push(`${orgId}/${key}`), { n: loads.length }));
  read('a', '1');
  read('a', '2');
  read('b', '1');
  read('a', '1');
  assert.deepEqual(loads, ['a/1', 'a/2', 'b/1'], 'a second read of a cached key does not load');
  read('c', '1');
  read('b', '1');
  read('a', '2');
  assert.deepEqual(loads, ['a/1', 'a/2', 'b/1', 'c/1', 'a/2'], 'c pushed out both entries of a, the org cached first; b stayed');
});

test('a weighed cache holds at most its room, dropping the org cached first; a record heavier than the room is never kept', async () => {
  const sizes = new Map<string, number>();
  const cache = new RecordCache<{ n: number }>(100, { weigh: (orgId, key) => sizes.get(`${orgId}/${key}`) ?? 0, max: 10 });
  const loads: string[] = [];
  const read = (orgId: string, key: string, size: number) => {
    sizes.set(`${orgId}/${key}`, size);
    return cache.read(orgId, key, () => (loads.push(`${orgId}/${key}`), { n: size }));
  };
  read('a', '1', 4);
  read('a', '2', 3);
  read('b', '1', 3);
  assert.equal(cache.weight, 10);
  read('b', '1', 3);
  assert.deepEqual(loads, ['a/1', 'a/2', 'b/1'], 'within its room, cached');
  read('c', '1', 2);
  assert.equal(cache.weight, 5, 'a (7) went to make room for c');
  read('b', '1', 3);
  read('a', '1', 4);
  assert.deepEqual(loads, ['a/1', 'a/2', 'b/1', 'c/1', 'a/1'], 'b stayed; a was read again');
  read('big', '1', 11);
  read('big', '1', 11);
  assert.deepEqual(loads.slice(-2), ['big/1', 'big/1'], 'too heavy to keep: read each time');
  assert.equal(cache.weight, 9, 'and nothing else was dropped for it');
  assert.equal(Object.isFrozen(read('big', '1', 11)), false, 'not frozen: no other reader shares it');
  await cache.writing('big', async () => {
    assert.equal(Object.isFrozen(read('big', '1', 11)), false, 'nor while its org is written');
    assert.ok(Object.isFrozen(read('big', '2', 1)), 'a record within the room read meanwhile is frozen, as a cached one');
  });
});

test("a write forgets every entry of its org, also when it fails, and no other org's; a missing record is not cached", async () => {
  const cache = new RecordCache<{ v: string }>();
  const stored = new Map<string, { v: string }>();
  const read = (orgId: string, key: string) => cache.read(orgId, key, () => stored.get(`${orgId}/${key}`));
  assert.equal(read('a', 'k'), undefined);
  stored.set('a/k', { v: 'one' });
  stored.set('a/j', { v: 'one' });
  stored.set('b/k', { v: 'one' });
  for (const [orgId, key] of [['a', 'k'], ['a', 'j'], ['b', 'k']] as const) assert.deepEqual(read(orgId, key), { v: 'one' });
  await assert.rejects(
    cache.writing('a', async () => {
      for (const slot of stored.keys()) stored.set(slot, { v: 'two' });
      throw new Error('disk full');
    }),
    /disk full/,
  );
  assert.deepEqual(read('a', 'k'), { v: 'two' });
  assert.deepEqual(read('a', 'j'), { v: 'two' });
  assert.deepEqual(read('b', 'k'), { v: 'one' }, 'only the org that was written is read again');
});

test('while a write of an org is in progress its reads go to the ledger and fill nothing; other orgs stay cached', async () => {
  const cache = new RecordCache<{ v: number }>();
  let loads = 0;
  const read = (orgId: string) => cache.read(orgId, 'k', () => ({ v: ++loads }));
  read('a');
  read('b');
  let finish: () => void = () => undefined;
  const writing = cache.writing('a', () => new Promise<void>((resolve) => (finish = resolve)));
  assert.ok(Object.isFrozen(read('a')), 'frozen like a cached record');
  read('a');
  read('b');
  assert.equal(loads, 4, 'both reads of a during the write loaded; b came from the cache');
  finish();
  await writing;
  read('a');
  read('a');
  assert.equal(loads, 5, 'after the write, a is loaded once and cached again');
});
