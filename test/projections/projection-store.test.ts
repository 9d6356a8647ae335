// Projection rows listed by entity type on both ledgers: every row of the type, whatever
// characters its entity id starts with (an emoji's UTF-8 sorts above the U+FFFF sentinel); a page
// ends once its rows pass MAX_PAGE_BYTES (a row's data can be 256 KiB); a status filter reads only
// the rows with that status, through their status index, which the boot upgrade builds for older rows.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_PAGE_BYTES } from '../../runtime/ledger/page-by-time.ts';
import { ProjectionStore } from '../../runtime/projections/projection-store.ts';
import { countingValueReads, LEDGER_KINDS } from '../helpers/ledgers.ts';

for (const kind of LEDGER_KINDS) {
  describe(`projection rows on ${kind.name}`, () => {
    test('a type filter lists every row of the type, including ids above U+FFFF, and nothing of the next type', async () => {
      const { ledger, close } = kind.open();
      try {
        const store = new ProjectionStore(ledger);
        const ids = ['a', '😀order', '\uffffz', 'zz'];
        await ledger.root.transaction(() => {
          ids.forEach((id, i) => {
            const source = { orgId: 'org_p', environment: 'production', runId: `run_${i}`, stepId: 'score', eventId: `evt_${i}`, at: 1_700_000_000_000 };
            store.write({ name: 'risk', entity: { type: 'order', id }, title: null, status: 'open', data: { i } }, source);
          });
          store.write({ name: 'risk', entity: { type: 'order_line', id: 'x' }, title: null, status: 'open', data: null }, { orgId: 'org_p', environment: 'production', runId: 'run_9', stepId: 'score', eventId: 'evt_9', at: 1_700_000_000_000 });
        });
        const listed = store.list('org_p', 'production', 'risk', { entityType: 'order', limit: 50 });
        assert.deepEqual(listed.rows.map((row) => row.entity_id).sort(), [...ids].sort());
        assert.equal(listed.next, null);
        const paged = store.list('org_p', 'production', 'risk', { entityType: 'order', limit: 2 });
        const rest = store.list('org_p', 'production', 'risk', { entityType: 'order', limit: 50, ...(paged.next === null ? {} : { after: paged.next }) });
        assert.deepEqual([...paged.rows, ...rest.rows].map((row) => row.entity_id).sort(), [...ids].sort());
        assert.equal(store.list('org_p', 'production', 'risk', { limit: 50 }).rows.length, 5);
        const exact = store.list('org_p', 'production', 'risk', { entityType: 'order', limit: ids.length });
        assert.equal(exact.rows.length, ids.length);
        assert.equal(exact.next, null, 'a page full exactly at the end of the rows ends the list');
      } finally {
        await close();
      }
    });

    test('a page ends once its rows pass MAX_PAGE_BYTES; the cursor brings the rest, each row once', async () => {
      const { ledger, close } = kind.open();
      try {
        const store = new ProjectionStore(ledger);
        const data = 'd'.repeat(Math.ceil(MAX_PAGE_BYTES / 4));
        await ledger.root.transaction(() => {
          for (let i = 0; i < 10; i++) {
            const source = { orgId: 'org_b', environment: 'production', runId: `run_${i}`, stepId: 'score', eventId: `evt_${i}`, at: 1_700_000_000_000 };
            store.write({ name: 'big', entity: { type: 'order', id: `o${i}` }, title: null, status: 'open', data }, source);
          }
        });
        const seen: string[] = [];
        const sizes: number[] = [];
        let after: [string, string] | null = null;
        do {
          const page: { rows: Array<{ entity_id: string | null }>; next: [string, string] | null } = store.list('org_b', 'production', 'big', { limit: 500, ...(after === null ? {} : { after }) });
          seen.push(...page.rows.map((row) => String(row.entity_id)));
          sizes.push(page.rows.length);
          after = page.next;
        } while (after !== null && sizes.length < 20);
        assert.deepEqual(seen, Array.from({ length: 10 }, (_, i) => `o${i}`));
        assert.deepEqual(sizes.slice(0, 2), [4, 4]);
      } finally {
        await close();
      }
    });

    test('a status filter reads only the rows with that status, follows a status change, and pages by its own index', async () => {
      const { ledger, close } = kind.open();
      try {
        // Counts the projection rows read, by key or by range.
        const counted = countingValueReads(ledger, 'projections');
        const store = new ProjectionStore(counted.ledger);
        const rows = 2_000;
        const write = (i: number, status: string | null): void => {
          const source = { orgId: 'org_s', environment: 'production', runId: `run_${i}`, stepId: 'score', eventId: `evt_${i}`, at: 1_700_000_000_000 };
          store.write({ name: 'risk', entity: { type: i % 2 === 0 ? 'order' : 'refund', id: `o${String(i).padStart(6, '0')}` }, title: null, status, data: { blob: 'x'.repeat(1024) } }, source);
        };
        await ledger.root.transaction(() => {
          for (let i = 0; i < rows; i++) write(i, i % 500 === 3 ? 'flagged' : i === 10 ? null : 'open');
        });
        const idsOf = (page: { rows: Array<{ entity_id: string | null }> }) => page.rows.map((row) => row.entity_id);

        const before = counted.reads();
        const flagged = store.list('org_s', 'production', 'risk', { status: 'flagged', limit: 50 });
        assert.deepEqual(idsOf(flagged), ['o000503', 'o001503', 'o000003', 'o001003'].sort((a, b) => (Number(a.slice(1)) % 2) - (Number(b.slice(1)) % 2) || a.localeCompare(b)));
        assert.equal(flagged.next, null);
        assert.ok(counted.reads() - before <= 4, `at most the 4 flagged rows (read ${counted.reads() - before})`);

        // A status change moves the row from one status's list to the other's.
        await ledger.root.transaction(() => {
          write(503, 'open');
          write(10, 'flagged');
          write(4, null);
        });
        assert.deepEqual(idsOf(store.list('org_s', 'production', 'risk', { status: 'flagged', limit: 50 })), ['o000010', 'o001503', 'o000003', 'o001003'].sort((a, b) => (Number(a.slice(1)) % 2) - (Number(b.slice(1)) % 2) || a.localeCompare(b)));
        assert.deepEqual(idsOf(store.list('org_s', 'production', 'risk', { status: 'flagged', entityType: 'refund', limit: 50 })), ['o001003', 'o000003', 'o001503'].sort());
        const flaggedEntries = [...ledger.openDatabase('projections-by-status').getKeys({ start: ['org_s', 'production', 'risk', 'flagged'], end: ['org_s', 'production', 'risk', 'flagged', '\uffff'] })];
        assert.equal(flaggedEntries.length, 4, 'the entry under the status a row left is removed');
        const open200 = store.list('org_s', 'production', 'risk', { status: 'open', limit: 2_000 });
        assert.equal(open200.rows.length, rows - 4 - 1, 'every open row, and not the one whose status was removed');
        assert.ok(open200.rows.every((row) => row.status === 'open'));

        // Paging the status list gives each row once, in the same order as one page.
        const paged: Array<string | null> = [];
        let after: [string, string] | null = null;
        do {
          const page: ReturnType<typeof store.list> = store.list('org_s', 'production', 'risk', { status: 'open', limit: 300, ...(after === null ? {} : { after }) });
          paged.push(...idsOf(page));
          after = page.next;
        } while (after !== null);
        assert.deepEqual(paged, idsOf(open200));
      } finally {
        await close();
      }
    });

    test('a sandbox reset removes the rows\' status entries with them', async () => {
      const { ledger, close } = kind.open();
      try {
        const store = new ProjectionStore(ledger);
        await ledger.root.transaction(() => {
          for (let i = 0; i < 5; i++) {
            const source = { orgId: 'org_r', environment: 'sandbox', runId: `run_${i}`, stepId: 'score', eventId: `evt_${i}`, at: 1_700_000_000_000 };
            store.write({ name: 'risk', entity: { type: 'order', id: `o${i}` }, title: null, status: 'open', data: null }, source);
          }
        });
        const index = ledger.openDatabase('projections-by-status');
        assert.equal([...index.getKeys({ start: ['org_r', 'sandbox'], end: ['org_r', 'sandbox', '\uffff'] })].length, 5);
        let removed = 0;
        for (let pass = 0; pass < 5; pass++) removed += await ledger.root.transaction(() => store.removeEnvironment('org_r', 'sandbox', 2));
        assert.equal(removed, 5);
        assert.deepEqual([...index.getKeys({ start: ['org_r', 'sandbox'], end: ['org_r', 'sandbox', '\uffff'] })], []);
      } finally {
        await close();
      }
    });

    test('rows written before the status index are indexed by the boot upgrade', async () => {
      const { ledger, close } = kind.open();
      try {
        const rowsTable = ledger.openDatabase('projections');
        const older = (i: number, status: string | null) => ({ name: 'risk', environment: 'production', entity_type: 'order', entity_id: `o${i}`, title: null, status, data: null, revision: 1, run_id: `run_${i}`, step_id: 'score', event_id: `evt_${i}`, created_at: 'x', updated_at: 'x' });
        await ledger.root.transaction(() => {
          for (let i = 0; i < 7; i++) rowsTable.put(['org_u', 'production', 'risk', 'order', `o${i}`], older(i, i % 3 === 0 ? 'flagged' : i === 5 ? null : 'open'));
        });
        const store = new ProjectionStore(ledger);
        assert.deepEqual(store.list('org_u', 'production', 'risk', { status: 'flagged', limit: 50 }).rows, [], 'not indexed yet');
        assert.equal(await store.indexStatuses(3), 7);
        assert.deepEqual(store.list('org_u', 'production', 'risk', { status: 'flagged', limit: 50 }).rows.map((row) => row.entity_id), ['o0', 'o3', 'o6']);
        assert.deepEqual(store.list('org_u', 'production', 'risk', { status: 'open', limit: 50 }).rows.map((row) => row.entity_id), ['o1', 'o2', 'o4']);
        assert.equal(await store.indexStatuses(), 7, 'idempotent');
        assert.equal(store.list('org_u', 'production', 'risk', { status: 'open', limit: 50 }).rows.length, 3);
      } finally {
        await close();
      }
    });
  });
}
