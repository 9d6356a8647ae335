// Projection rows listed by entity type on both ledgers: every row of the type, whatever
// characters its entity id starts with (an emoji's UTF-8 sorts above the U+FFFF sentinel); a page
// ends at a bounded scan, and once its rows pass MAX_PAGE_BYTES (a row's data can be 256 KiB).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_PAGE_BYTES, MAX_SCAN_PER_PAGE } from '../../runtime/ledger/page-by-time.ts';
import { ProjectionStore } from '../../runtime/projections/projection-store.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

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

    test('a status filter that matches little scans a bounded stretch per page and hands back a cursor to go on', async () => {
      const { ledger, close } = kind.open();
      try {
        const store = new ProjectionStore(ledger);
        const rows = MAX_SCAN_PER_PAGE + 10;
        await ledger.root.transaction(() => {
          for (let i = 0; i < rows; i++) {
            const source = { orgId: 'org_s', environment: 'production', runId: `run_${i}`, stepId: 'score', eventId: `evt_${i}`, at: 1_700_000_000_000 };
            const id = `o${String(i).padStart(6, '0')}`;
            store.write({ name: 'risk', entity: { type: 'order', id }, title: null, status: i === rows - 1 ? 'flagged' : 'open', data: null }, source);
          }
        });
        const first = store.list('org_s', 'production', 'risk', { status: 'flagged', limit: 50 });
        assert.deepEqual(first.rows, [], 'nothing flagged within the first stretch');
        assert.ok(first.next !== null, 'but a cursor to go on from');
        const second = store.list('org_s', 'production', 'risk', { status: 'flagged', limit: 50, after: first.next });
        assert.deepEqual(second.rows.map((row) => row.entity_id), [`o${String(rows - 1).padStart(6, '0')}`]);
        assert.equal(second.next, null);
      } finally {
        await close();
      }
    });
  });
}
