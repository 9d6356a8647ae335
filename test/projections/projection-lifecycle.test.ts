// The life of projection rows on both ledgers: each org's rows are counted as they are written and
// removed (one row, a whole projection, a sandbox reset); appended rows (no entity) are pruned once
// the retention has passed since they were written, with their status entries, while rows with an
// entity stay; a whole projection's delete stops between chunks when the runtime stops; and the boot
// upgrade counts and indexes rows an older release wrote.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DELETE_CHUNK, removeProjectionRows } from '../../runtime/api/projections-api.ts';
import { pruneAppendedRows } from '../../runtime/projections/appended-row-retention.ts';
import { ProjectionStore } from '../../runtime/projections/projection-store.ts';
import { countingValueReads, LEDGER_KINDS } from '../helpers/ledgers.ts';

const T0 = Date.UTC(2026, 10, 1);
const DAY = 86_400_000;

const at = (orgId: string, i: number, ms: number, environment = 'production') => ({ orgId, environment, runId: `run_${i}`, stepId: 'log', eventId: `evt_${i}`, at: ms });
const appended = (name: string, status: string | null = null) => ({ name, entity: null, title: null, status, data: { kind: 'appended' } });
const entity = (name: string, id: string, status: string | null = 'open') => ({ name, entity: { type: 'order', id }, title: null, status, data: { id } });

for (const kind of LEDGER_KINDS) {
  describe(`projection row lifecycle on ${kind.name}`, () => {
    test('rows are counted per org as they are added and removed; an update adds none', async () => {
      const { ledger, close } = kind.open();
      try {
        const store = new ProjectionStore(ledger);
        await ledger.root.transaction(() => {
          store.write(entity('risk', 'o1'), at('org_a', 1, T0));
          store.write(entity('risk', 'o1', 'closed'), at('org_a', 2, T0 + 1));
          store.write(entity('risk', 'o2'), at('org_a', 3, T0));
          store.write(appended('log'), at('org_a', 4, T0));
          store.write(appended('log'), at('org_a', 5, T0, 'sandbox'));
          store.write(entity('risk', 'o1'), at('org_b', 1, T0));
        });
        assert.equal(store.rowCount('org_a'), 4);
        assert.equal(store.rowCount('org_b'), 1);
        assert.equal(store.get('org_a', 'production', 'risk', 'order', 'o1')?.revision, 2);

        assert.equal(await ledger.root.transaction(() => store.removeRow('org_a', 'production', 'risk', 'order', 'o1')), true);
        assert.equal(await ledger.root.transaction(() => store.removeRow('org_a', 'production', 'risk', 'order', 'o1')), false, 'gone already');
        assert.equal(store.rowCount('org_a'), 3);
        assert.deepEqual(store.list('org_a', 'production', 'risk', { status: 'closed', limit: 10 }).rows, [], 'its status entry went with it');
        assert.equal(await ledger.root.transaction(() => store.removeEnvironment('org_a', 'sandbox')), 1);
        assert.equal(store.rowCount('org_a'), 2);
        assert.equal(await ledger.root.transaction(() => store.removeProjection('org_a', 'production', 'log', 10)), 1);
        assert.equal(store.rowCount('org_a'), 1);
        assert.equal(store.rowCount('org_b'), 1, 'another org keeps its count');
      } finally {
        await close();
      }
    });

    test('names lists each projection holding rows once, in order, paged, names that are prefixes of others included', async () => {
      const { ledger, close } = kind.open();
      try {
        const store = new ProjectionStore(ledger);
        const names = ['b', 'a.b', 'a', 'ab', 'a-', 'a_z'];
        await ledger.root.transaction(() => {
          names.forEach((name, i) => {
            store.write(entity(name, 'o1'), at('org_n', i, T0));
            store.write(entity(name, 'o2'), at('org_n', i, T0));
            store.write(appended(name), at('org_n', i, T0));
          });
          store.write(entity('zz', 'o1'), at('org_n', 9, T0, 'sandbox'));
          store.write(entity('c', 'o1'), at('org_o', 9, T0));
        });
        const sorted = [...names].sort((x, y) => (Buffer.from(x) < Buffer.from(y) ? -1 : 1));
        assert.deepEqual(store.names('org_n', 'production', { limit: 50 }), { names: sorted, next: null });
        const seen: string[] = [];
        let after: string | null = null;
        do {
          const page: { names: string[]; next: string | null } = store.names('org_n', 'production', { limit: 4, ...(after === null ? {} : { after }) });
          seen.push(...page.names);
          after = page.next;
        } while (after !== null);
        assert.deepEqual(seen, sorted);
        assert.deepEqual(store.names('org_n', 'sandbox', { limit: 50 }).names, ['zz']);
        assert.equal(store.names('org_n', 'production', { limit: 6 }).next, null, 'a page full exactly at the end ends the list');
      } finally {
        await close();
      }
    });

    test('writing, updating, deleting and pruning rows never decodes a row (its data may be 256 KiB of tiny values)', async () => {
      const { ledger, close } = kind.open();
      try {
        const counted = countingValueReads(ledger, 'projections');
        const store = new ProjectionStore(counted.ledger);
        const many = Array.from({ length: 2_000 }, () => ({}));
        await ledger.root.transaction(() => {
          for (let i = 0; i < 20; i++) store.write({ ...entity('big', `o${i}`), data: many }, at('org_x', i, T0));
          for (let i = 0; i < 20; i++) store.write({ ...entity('big', `o${i}`, 'closed'), data: many }, at('org_x', i, T0 + 1));
          for (let i = 0; i < 20; i++) store.write({ ...appended('log', 'seen'), data: many }, at('org_x', i, T0));
          for (let i = 0; i < 20; i++) store.write({ ...entity('kept', `o${i}`), data: many }, at('org_x', i, T0, 'sandbox'));
        });
        assert.equal(store.get('org_x', 'production', 'big', 'order', 'o3')?.revision, 2, 'an update counts its revision');
        assert.equal(store.get('org_x', 'production', 'big', 'order', 'o3')?.created_at, new Date(T0).toISOString(), 'and keeps its creation');
        const before = counted.reads();
        await ledger.root.transaction(() => store.removeRow('org_x', 'production', 'big', 'order', 'o0'));
        await ledger.root.transaction(() => store.removeProjection('org_x', 'production', 'big', 1000));
        assert.equal(await pruneAppendedRows(ledger.root, store, T0 + 2 * DAY, DAY), 20);
        assert.equal(await ledger.root.transaction(() => store.removeEnvironment('org_x', 'sandbox', 1000)), 20);
        assert.equal(counted.reads() - before, 0, 'no row was read to remove it');
        assert.equal(store.rowCount('org_x'), 0);
        assert.deepEqual(store.list('org_x', 'production', 'big', { status: 'closed', limit: 10 }).rows, []);
      } finally {
        await close();
      }
    });

    test('a projection is removed a chunk at a time, other projections left alone', async () => {
      const { ledger, close } = kind.open();
      try {
        const store = new ProjectionStore(ledger);
        await ledger.root.transaction(() => {
          for (let i = 0; i < 7; i++) store.write(entity('risk', `o${i}`), at('org_c', i, T0));
          store.write(entity('other', 'o1'), at('org_c', 9, T0));
        });
        const chunks: number[] = [];
        for (;;) {
          const chunk = await ledger.root.transaction(() => store.removeProjection('org_c', 'production', 'risk', 3));
          chunks.push(chunk);
          if (chunk < 3) break;
        }
        assert.deepEqual(chunks, [3, 3, 1]);
        assert.deepEqual(store.list('org_c', 'production', 'risk', { limit: 10 }).rows, []);
        assert.deepEqual(store.list('org_c', 'production', 'risk', { status: 'open', limit: 10 }).rows, []);
        assert.equal(store.list('org_c', 'production', 'other', { limit: 10 }).rows.length, 1);
        assert.equal(store.rowCount('org_c'), 1);
      } finally {
        await close();
      }
    });

    test("a whole projection's delete ends between chunks once the runtime stops, saying how many it removed", async () => {
      const { ledger, close } = kind.open();
      try {
        const store = new ProjectionStore(ledger);
        await ledger.root.transaction(() => {
          for (let i = 0; i < DELETE_CHUNK * 2 + 5; i++) store.write(entity('many', `o${i}`), at('org_s', i, T0));
        });
        const stopping = new AbortController();
        stopping.abort();
        await assert.rejects(removeProjectionRows(ledger, store, 'org_s', 'production', 'many', stopping.signal), (error: Error & { code?: string; status?: number }) => {
          assert.deepEqual([error.status, error.code], [503, 'stopping']);
          assert.match(error.message, new RegExp(`cut short after ${DELETE_CHUNK} rows, which stay removed`));
          return true;
        });
        assert.equal(store.rowCount('org_s'), DELETE_CHUNK + 5);
        assert.equal(await removeProjectionRows(ledger, store, 'org_s', 'production', 'many'), DELETE_CHUNK + 5, 'sent again, it removes the rest');
      } finally {
        await close();
      }
    });

    test('appended rows older than the retention are pruned, with their status entries; rows with an entity stay', async () => {
      const { ledger, close } = kind.open();
      try {
        const store = new ProjectionStore(ledger);
        await ledger.root.transaction(() => {
          for (let i = 0; i < 5; i++) store.write(appended('log', 'seen'), at('org_d', i, T0 + i * DAY));
          store.write(entity('risk', 'o1'), at('org_d', 9, T0));
          store.write(appended('log'), at('org_e', 1, T0));
        });
        assert.equal(store.rowCount('org_d'), 6);
        // Retention 2 days, now T0 + 4.5 days: rows written before T0 + 2.5 days go (days 0, 1, 2).
        const pruned = await pruneAppendedRows(ledger.root, store, T0 + 4.5 * DAY, 2 * DAY, 2);
        assert.equal(pruned, 4, "org_d's three and org_e's one");
        const left = store.list('org_d', 'production', 'log', { limit: 10 }).rows.map((row) => row.run_id);
        assert.deepEqual(left.sort(), ['run_3', 'run_4']);
        assert.deepEqual(store.list('org_d', 'production', 'log', { status: 'seen', limit: 10 }).rows.map((row) => row.run_id).sort(), ['run_3', 'run_4']);
        assert.equal(store.get('org_d', 'production', 'risk', 'order', 'o1')?.revision, 1, 'a row with an entity is not pruned, however old');
        assert.equal(store.rowCount('org_d'), 3);
        assert.equal(store.rowCount('org_e'), 0);
        assert.equal(await pruneAppendedRows(ledger.root, store, T0 + 4.5 * DAY, 2 * DAY), 0, 'nothing more is due');
        // A row removed through the API takes its retention entry with it: nothing is left for the prune.
        await ledger.root.transaction(() => store.removeProjection('org_d', 'production', 'log', 10));
        assert.equal(await pruneAppendedRows(ledger.root, store, T0 + 100 * DAY, 2 * DAY), 0);
        assert.equal(store.rowCount('org_d'), 1);
      } finally {
        await close();
      }
    });

    test('the boot upgrade counts the rows an older release wrote and indexes its appended ones for retention', async () => {
      const { ledger, close } = kind.open();
      try {
        const rowsTable = ledger.openDatabase('projections');
        const older = (entityType: string | null, id: string, createdAt: number) => ({ name: 'log', environment: 'production', entity_type: entityType, entity_id: entityType === null ? null : id, title: null, status: null, data: null, revision: 1, run_id: id, step_id: 'log', event_id: 'evt', created_at: new Date(createdAt).toISOString(), updated_at: new Date(createdAt).toISOString() });
        await ledger.root.transaction(() => {
          for (let i = 0; i < 5; i++) rowsTable.put(['org_u', 'production', 'log', '~step', `run_${i}:log`], older(null, `run_${i}`, T0 + i * DAY));
          rowsTable.put(['org_u', 'production', 'log', 'order', 'o1'], older('order', 'o1', T0));
          rowsTable.put(['org_v', 'sandbox', 'log', 'order', 'o1'], older('order', 'o1', T0));
        });
        const store = new ProjectionStore(ledger);
        assert.equal(store.rowCount('org_u'), 0, 'not counted yet');
        assert.equal(await store.countRows(2), 7);
        assert.equal(store.rowCount('org_u'), 6);
        assert.equal(store.rowCount('org_v'), 1);
        assert.equal(await store.countRows(), 7, 'read again');
        assert.equal(store.rowCount('org_u'), 6, 'idempotent: counted once');
        assert.equal(await pruneAppendedRows(ledger.root, store, T0 + 2.5 * DAY, DAY), 2, 'its appended rows are pruned like new ones');
        assert.equal(store.rowCount('org_u'), 4);
        // A row whose creation time cannot be read (hand-made, say) is still updated, from the write's time.
        await ledger.root.transaction(() => rowsTable.put(['org_w', 'production', 'log', 'order', 'bad'], { ...older('order', 'bad', T0), created_at: 'x' }));
        await store.countRows();
        const updated = await ledger.root.transaction(() => store.write(entity('log', 'bad'), at('org_w', 1, T0 + DAY)));
        assert.deepEqual([updated.revision, updated.created_at], [2, new Date(T0 + DAY).toISOString()]);
      } finally {
        await close();
      }
    });
  });
}
