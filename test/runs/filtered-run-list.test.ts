// A filtered run list reads only the runs that match: the runs-by-time index holds each run's
// workflow and state (rewritten as the state changes), so runs of other workflows or states are
// skipped without reading them (a run holds its steps' outputs). Through a real runtime.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';

const ORG = 'acct-run-filters';
let rt: TestRuntime;
let key: string;
let accepting: Receiver;
let refusing: Receiver;
let paidWorkflow: string;
let refundWorkflow: string;

const get = (path: string) => call(rt.url, 'GET', `/organizations/${ORG}${path}`, { token: key });

/** Run ids a list answers, and how many runs it read from the ledger. */
async function listed(query: string): Promise<{ ids: string[]; reads: number }> {
  const store = rt.runtime.context.runs;
  const original = store.get;
  let reads = 0;
  store.get = function (this: typeof store, ...args: Parameters<typeof original>) {
    reads++;
    return original.apply(this, args);
  };
  try {
    const answer = await get(`/runs?limit=100&${query}`);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.body.next_cursor, null);
    return { ids: answer.body.runs.map((run: { run_id: string }) => run.run_id), reads };
  } finally {
    store.get = original;
  }
}

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  accepting = await startReceiver([{ status: 200, body: '{}' }]);
  refusing = await startReceiver([{ status: 400, body: 'no' }]);
  const create = async (name: string, trigger: string, url: string): Promise<string> => {
    const answer = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: trigger, steps: [{ id: 'send', type: 'webhook', url }] } });
    assert.equal(answer.status, 201, answer.text);
    return answer.body.workflow.id;
  };
  paidWorkflow = await create('paid', 'order.paid', accepting.url);
  refundWorkflow = await create('refund', 'order.refunded', refusing.url);
  for (let n = 0; n < 8; n++) {
    const type = n % 4 === 1 ? 'order.refunded' : 'order.paid';
    const answer = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type, id: `evt-${n}`, payload: { n } } });
    assert.equal(answer.status, 202, answer.text);
  }
  await eventually('every run finished', () => get('/runs?limit=100'), (answer) =>
    answer.body.runs.length === 8 && answer.body.runs.every((run: { state: string }) => run.state === 'completed' || run.state === 'failed'));
});
after(async () => {
  await rt.close();
  await accepting.close();
  await refusing.close();
});

test('a workflow or state filter reads only the runs that match, and sees each run in the state it is in now', async () => {
  const all = (await get('/runs?limit=100')).body.runs as Array<{ run_id: string; state: string; workflow_id: string }>;
  const idsWhere = (keep: (run: { state: string; workflow_id: string }) => boolean) => all.filter(keep).map((run) => run.run_id);
  assert.equal(idsWhere((run) => run.workflow_id === refundWorkflow).length, 2);

  const refunds = await listed(`workflow_id=${refundWorkflow}`);
  assert.deepEqual(refunds.ids, idsWhere((run) => run.workflow_id === refundWorkflow));
  assert.equal(refunds.reads, 2);

  // Both states were reached after the run was created: the index entry followed them.
  const failed = await listed('state=failed');
  assert.deepEqual(failed.ids, idsWhere((run) => run.state === 'failed'));
  assert.deepEqual(failed.ids, refunds.ids);
  assert.equal(failed.reads, 2);
  const completed = await listed('state=completed');
  assert.deepEqual(completed.ids, idsWhere((run) => run.state === 'completed' && run.workflow_id === paidWorkflow));
  assert.equal(completed.ids.length, 6);
  assert.equal(completed.reads, 6);

  const none = await listed(`state=completed&workflow_id=${refundWorkflow}`);
  assert.deepEqual(none, { ids: [], reads: 0 });
});
