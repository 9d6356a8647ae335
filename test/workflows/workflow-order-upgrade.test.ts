// A data dir whose workflows were stored before they were indexed by creation (data format 2)
// lists them all after boot, newest first and paged.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { DATA_FORMAT } from '../../runtime/ledger/data-format.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { WORKFLOW_ORDER } from '../../runtime/workflows/workflow-store.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';

const ORG = 'acct-order-upgrade';

test('boot indexes workflows stored before the creation index', { skip: process.env['SLUICE_TEST_LEDGER'] === 'memory' && 'reopens an LMDB data dir' }, async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 30, 9, 0, 0));
  const dataDir = tempDir();
  try {
    let rt = await startRuntime({ clock, dataDir });
    let key: string;
    const made: string[] = [];
    try {
      key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
      for (let i = 0; i < 5; i++) {
        clock.advance(1000);
        const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: `wf-${i}`, trigger_event: 'x.y', steps: [{ type: 'delay', duration_ms: 1000 }] } });
        assert.equal(created.status, 201, created.text);
        made.unshift(created.body.workflow.id);
      }
    } finally {
      await rt.close();
    }
    // As an older release left it: no index entries, stamped 2.
    const ledger = openLedger(dataDir);
    try {
      const order = ledger.openDatabase(WORKFLOW_ORDER);
      await durably(ledger.root, ledger.root.transaction(() => {
        for (const indexKey of [...order.getKeys({})]) order.remove(indexKey);
        ledger.openDatabase('data-format').put('version', 2);
      }));
    } finally {
      await ledger.close();
    }
    rt = await startRuntime({ clock, dataDir });
    try {
      const listed: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { status: number; text: string; body: { workflows: Array<{ id: string }>; next_cursor: string | null } } = await call(rt.url, 'GET', `/organizations/${ORG}/workflows?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`, { token: key });
        assert.equal(page.status, 200, page.text);
        listed.push(...page.body.workflows.map((w) => w.id));
        cursor = page.body.next_cursor;
      } while (cursor !== null);
      assert.deepEqual(listed, made, 'every workflow, newest first, across pages');
      assert.equal(rt.runtime.ledger.openDatabase('data-format').get('version'), DATA_FORMAT);
    } finally {
      await rt.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
