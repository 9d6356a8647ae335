// A deleted workflow's versions and signing secrets stay while a run names it, and go once the
// retention period has passed since the delete and no run does: a create, patch and delete loop no
// longer grows an org without end. Workflows deleted by an older release are listed at boot. On
// every ledger, with the real stores.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { asEventId, asRunId, asWorkflowId } from '../../actors/ids.ts';
import { startRunActor } from '../../actors/run-transition.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { RunStore } from '../../runtime/runs/run-store.ts';
import { DELETED_WORKFLOWS, RECHECK_MS } from '../../runtime/workflows/deleted-workflows.ts';
import { pruneDeletedWorkflows } from '../../runtime/workflows/prune-deleted-workflows.ts';
import { parseWorkflowInput } from '../../runtime/workflows/parse-workflow.ts';
import { WorkflowStore } from '../../runtime/workflows/workflow-store.ts';
import { runInput, webhookStep } from '../actors/run-fixtures.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const ORG = 'org_a';
const T = Date.UTC(2026, 11, 1);
const RETENTION = 30 * 24 * 60 * 60 * 1000;
const draft = (name: string) => parseWorkflowInput({ name, trigger_event: 'order.paid', steps: [{ id: 'send', type: 'webhook', url: 'https://example.com/hook' }] });

for (const kind of LEDGER_KINDS) {
  describe(`deleted workflows' versions are pruned: ${kind.name}`, () => {
    let opened: ReturnType<typeof kind.open>;
    let ledger: Ledger;
    let workflows: WorkflowStore;
    let runs: RunStore;
    const prune = (nowMs: number) => pruneDeletedWorkflows({ deleted: workflows.deleted, runs }, nowMs, RETENTION);

    /** A workflow with three versions, deleted at T. */
    async function deletedWorkflow(name: string): Promise<string> {
      const { workflow } = await workflows.create(draft(name), ORG, T - 1000);
      await workflows.update(ORG, workflow.id, { ...draft(name), name: `${name} 2` }, T - 900);
      await workflows.update(ORG, workflow.id, { ...draft(name), name: `${name} 3` }, T - 800);
      await workflows.delete(ORG, workflow.id, T);
      return workflow.id;
    }

    /** Stores a run of `workflowId`, as ingest would have before the delete. */
    async function runOf(workflowId: string, n: number) {
      const { run, actor } = startRunActor(runInput([webhookStep('send')], { orgId: ORG as never, runId: asRunId(`run_${n}`), eventId: asEventId(`evt_${n}`), workflowId: asWorkflowId(workflowId), createdAt: T - 500 }));
      actor.stop();
      await ledger.root.transaction(() => runs.write(run, undefined));
      return run;
    }

    const versionsOf = (workflowId: string): number => [...workflows.versions(ORG, workflowId)].length;

    beforeEach(() => {
      opened = kind.open();
      ledger = opened.ledger;
      workflows = new WorkflowStore(ledger);
      runs = new RunStore(ledger);
    });
    afterEach(() => opened.close());

    test('a deleted workflow no run names goes a retention period after the delete; one a run names waits until it does not', async () => {
      const unnamed = await deletedWorkflow('unnamed');
      const named = await deletedWorkflow('named');
      const run = await runOf(named, 1);
      assert.equal(versionsOf(unnamed), 3);
      assert.equal(workflows.signingSecrets(ORG, unnamed).length, 1);

      assert.deepEqual(await prune(T + RETENTION - 1), { workflows: 0, versions: 0, putOff: 0 }, 'not before the retention period has passed');
      assert.deepEqual(await prune(T + RETENTION), { workflows: 1, versions: 3, putOff: 1 });
      assert.equal(versionsOf(unnamed), 0);
      assert.deepEqual(workflows.signingSecrets(ORG, unnamed), []);
      assert.equal(versionsOf(named), 3, 'a run still names it: its versions stay, for explain and resume');
      assert.equal(workflows.signingSecrets(ORG, named).length, 1);

      assert.deepEqual(await prune(T + RETENTION + RECHECK_MS - 1), { workflows: 0, versions: 0, putOff: 0 }, 'put off for a day');
      assert.deepEqual(await prune(T + RETENTION + RECHECK_MS), { workflows: 0, versions: 0, putOff: 1 }, 'still named a day later');
      await ledger.root.transaction(() => runs.remove(run));
      assert.deepEqual(await prune(T + RETENTION + 2 * RECHECK_MS), { workflows: 1, versions: 3, putOff: 0 });
      assert.equal(versionsOf(named), 0);
      assert.equal([...ledger.openDatabase(DELETED_WORKFLOWS).getKeys({})].length, 0, 'nothing left listed');
    });

    test('a run stored before the time index named workflows still counts: it is read', async () => {
      const named = await deletedWorkflow('old-run');
      const run = await runOf(named, 2);
      const byTime = ledger.openDatabase('runs-by-time');
      const ctx = run.context;
      await ledger.root.transaction(() => byTime.put([ctx.orgId, ctx.environment, ctx.createdAt, ctx.runId], null));
      assert.deepEqual(await prune(T + RETENTION), { workflows: 0, versions: 0, putOff: 1 });
      assert.equal(versionsOf(named), 3);
    });

    test('a live workflow and another org\'s runs are left alone', async () => {
      const { workflow: live } = await workflows.create(draft('live'), ORG, T);
      const gone = await deletedWorkflow('gone');
      // A run in another org under the same workflow id does not name this org's workflow.
      const { run, actor } = startRunActor(runInput([webhookStep('send')], { orgId: 'org_b' as never, runId: asRunId('run_b'), workflowId: asWorkflowId(gone), createdAt: T }));
      actor.stop();
      await ledger.root.transaction(() => runs.write(run, undefined));
      assert.deepEqual(await prune(T + RETENTION), { workflows: 1, versions: 3, putOff: 0 });
      assert.equal(versionsOf(live.id), 1);
      assert.equal(versionsOf(gone), 0);
    });

    test('workflows an older release deleted (versions without a record) are listed once at boot', async () => {
      const old = await deletedWorkflow('old');
      // As an older release left it: deleted, but not listed.
      await ledger.root.transaction(() => ledger.openDatabase(DELETED_WORKFLOWS).remove([ORG, old]));
      const { workflow: live } = await workflows.create(draft('live'), ORG, T);
      assert.equal(await workflows.deleted.listEarlierDeletes(T), 1);
      assert.equal(await workflows.deleted.listEarlierDeletes(T), 0, 'idempotent');
      assert.deepEqual(await prune(T + RETENTION), { workflows: 1, versions: 3, putOff: 0 });
      assert.equal(versionsOf(old), 0);
      assert.equal(versionsOf(live.id), 1);
    });

    test('the deleted workflows due a look are read a page per event-loop turn, each once', async () => {
      const table = ledger.openDatabase(DELETED_WORKFLOWS);
      const due: string[] = [];
      await ledger.root.transaction(() => {
        for (let i = 0; i < 25; i++) {
          const id = `wf_${String(i).padStart(3, '0')}`;
          // Every third was deleted after the cut, or put off past now: not due.
          void table.put([ORG, id], i % 3 === 0 ? [T + 10, T] : [T, T]);
          if (i % 3 !== 0) due.push(id);
        }
      });
      let otherWorkRan = false;
      const reading = workflows.deleted.due(T, T + 1, 4);
      setImmediate(() => (otherWorkRan = true));
      const found = await reading;
      assert.equal(otherWorkRan, true, 'other work runs between pages');
      assert.deepEqual(found.map((workflow) => workflow.workflowId), due);
      for (const perTurn of [1, 24, 25, 26]) assert.deepEqual((await workflows.deleted.due(T, T + 1, perTurn)).map((workflow) => workflow.workflowId), due, `${perTurn} per turn`);
    });
  });
}
