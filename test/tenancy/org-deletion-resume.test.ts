// A deletion that could not finish goes on later: one cut short right after its mark (the process
// went down) is finished after the next start, whose recovery leaves the org's runs alone; one whose
// hook-runner was down keeps the runner's part pending (one ForgetOrg per pass) and finishes it once
// the runner is back; a stop while it is being asked withdraws the call, and the next start asks
// again. A runner of an earlier release, without ForgetOrg, has the org's secrets deleted one by one.
// On LMDB only: the tests reopen a data dir.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { createLogger } from '../../runtime/log.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { fenceDeletedOrgs, type DeletedOrgs } from '../../runtime/tenancy/deleted-orgs.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { OrgDeletions } from '../../runtime/tenancy/org-deletion.ts';
import { OrganizationStore } from '../../runtime/tenancy/organizations.ts';
import { call, createOrg } from '../helpers/http.ts';
import { startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';

const DOOMED = 'doomed-r4';
const KEEPER = 'keeper-r4';

/** Opens the runtime's ledger as the runtime does (fenced), with its deletion records. */
function openFenced(dataDir: string) {
  const ledger = openLedger(dataDir);
  const { deleted, tables } = fenceDeletedOrgs(ledger);
  return { ledger, tables, deleted, orgs: new OrganizationStore(ledger, (orgId) => deleted.has(orgId)) };
}

test('a deletion cut short after its mark is finished after the next start, whose recovery leaves the org\'s runs alone', async () => {
  const dataDir = tempDir();
  const flaky = await startReceiver([{ status: 503 }]);
  try {
    const first = await startRuntime({ dataDir, args: ['--runner', 'off'] });
    const waitingRun = async (org: string): Promise<string> => {
      const key = await createOrg(first.url, ADMIN_TOKEN, org);
      const steps = [{ type: 'webhook', url: flaky.url, retry: { max_retries: 5, initial_ms: 600_000, max_ms: 600_000 } }];
      assert.equal((await call(first.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'flaky', trigger_event: 'go', steps } })).status, 201);
      assert.equal((await call(first.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'go', payload: {}, id: 'go-1' } })).status, 202);
      const reactions = await eventually(`${org} run`, async () => (await call(first.url, 'GET', `/organizations/${org}/events/go-1`, { token: key })).body.reactions as Array<{ run_id: string }>, (r) => r.length === 1);
      const runId = reactions[0]!.run_id;
      await eventually(`${org} run waiting on its retry`, () => first.runtime.engine.timerDueAt(org, runId), (due) => due !== undefined);
      return runId;
    };
    const doomedRun = await waitingRun(DOOMED);
    const keeperRun = await waitingRun(KEEPER);
    await first.runtime.close();

    // The mark alone, as a process that went down right after writing it leaves the ledger.
    const opened = openFenced(dataDir);
    const record = { organization_id: DOOMED, requested_at: new Date().toISOString(), state: 'removing', removed_at: null, actions_with_secrets: [], removed: {} } as const;
    assert.equal(await opened.deleted.mark(record, () => true, () => void opened.ledger.orgs.remove([DOOMED])), true);
    await opened.ledger.close();

    const second = await startRuntime({ dataDir, args: ['--runner', 'off'] });
    try {
      assert.equal(second.runtime.engine.timerDueAt(DOOMED, doomedRun), undefined, 'recovery left the deleted org\'s run alone');
      assert.notEqual(second.runtime.engine.timerDueAt(KEEPER, keeperRun), undefined, 'and picked up the other org\'s');
      assert.equal((await call(second.url, 'GET', `/organizations/${DOOMED}`, { token: ADMIN_TOKEN })).status, 404);
      // The start's first pruning pass takes the deletion up again.
      await eventually('the deletion finished', async () => (await call(second.url, 'GET', `/organizations/${DOOMED}/deletion`, { token: ADMIN_TOKEN })).body.deletion.state, (state) => state === 'removed');
      assert.equal(second.runtime.context.runs.get(DOOMED, doomedRun), undefined);
      assert.equal(second.runtime.context.events.get(DOOMED, 'go-1'), undefined);
      assert.notEqual(second.runtime.context.runs.get(KEEPER, keeperRun), undefined);
      assert.equal(flaky.received.length, 2, 'one request per org, none sent again');
    } finally {
      await second.runtime.close();
    }
  } finally {
    await flaky.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

const ACTIONS = ['act_0000000000000001', 'act_0000000000000002', 'act_0000000000000003'];

/** A real runner holding a secret per action for both orgs, and deletions on a fenced ledger; `use` runs the test. */
async function withRunnerSecrets(use: (setup: { runner: RunnerFixture; client: HookRunnerClient; deletions: OrgDeletions; ledger: Ledger; deleted: DeletedOrgs; stop: AbortController }) => Promise<void>, logger = createLogger('silent')): Promise<void> {
  const runner = await startRunner();
  const dataDir = tempDir();
  const { ledger, tables, deleted, orgs } = openFenced(dataDir);
  // Short deadlines: the runner is down for part of the tests.
  const client = new HookRunnerClient(() => runner.child.address(), runner.token, { deadlinesMs: { other: 1_000, compile: 1_000 } });
  const stop = new AbortController();
  try {
    for (const org of [DOOMED, KEEPER]) {
      await orgs.create({ id: org, name: org, plan: 'pro', max_concurrent_runs: 4, created_at: new Date().toISOString(), updated_at: new Date().toISOString() }, () => undefined);
      for (const actionId of ACTIONS) await client.putSecret({ orgId: org, actionId, key: 'API_KEY', value: `secret of ${org}` });
    }
    // A record of the org for the removal to count (its org record goes with the mark).
    await ledger.root.transaction(() => void ledger.sources.put([DOOMED, 'shop'], { name: 'shop' }));
    const deletions = new OrgDeletions({
      ledger, orgs, deleted, tables,
      actionIds: () => [...ACTIONS],
      runner: client,
      secretWritesSettled: async () => undefined,
      onFenced: () => undefined, onRemoved: () => undefined,
      logger,
      now: () => Date.now(),
      stop: stop.signal,
    });
    await use({ runner, client, deletions, ledger, deleted, stop });
  } finally {
    stop.abort();
    client.close();
    await runner.close();
    await ledger.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const secretsOf = async (client: HookRunnerClient, orgId: string): Promise<string[][]> => Promise.all(ACTIONS.map((actionId) => client.listSecretKeys({ orgId, actionId })));

test('with the hook-runner down, the runner\'s part stays pending (one call per pass) and is finished once it is back', async () => {
  await withRunnerSecrets(async ({ runner, client, deletions, ledger, deleted }) => {
    const forgetOrg = client.forgetOrg.bind(client);
    let forgets = 0;
    client.forgetOrg = (orgId, signal) => {
      forgets++;
      return forgetOrg(orgId, signal);
    };
    await runner.child.stop();
    assert.equal((await deletions.delete(DOOMED))?.state, 'removing');
    await deletions.idle();
    const pending = deletions.get(DOOMED)!;
    assert.equal(pending.state, 'removing');
    assert.deepEqual(pending.actions_with_secrets, ACTIONS);
    assert.equal(forgets, 1);
    assert.equal(deleted.unfinishedCount, 1);
    assert.deepEqual(pending.removed, { sources: 1 }, 'the ledger\'s removal is counted');
    assert.equal(ledger.orgs.get([DOOMED]), undefined, 'the ledger\'s part is done meanwhile');

    await runner.restart();
    assert.equal(await deletions.finishLeftOver(), 1);
    const done = deletions.get(DOOMED)!;
    assert.equal(done.state, 'removed');
    assert.deepEqual(done.actions_with_secrets, []);
    assert.notEqual(done.removed_at, null);
    assert.equal(deleted.unfinishedCount, 0);
    assert.equal(forgets, 2);
    assert.deepEqual(await secretsOf(client, DOOMED), [[], [], []]);
    assert.deepEqual(await secretsOf(client, KEEPER), [['API_KEY'], ['API_KEY'], ['API_KEY']]);
    assert.equal(await deletions.finishLeftOver(), 0, 'nothing is left to finish');
    assert.equal(forgets, 2, 'a finished deletion asks the runner nothing');
  });
});

test('a stop while the hook-runner is asked to forget a deleted org withdraws the call, and the next start asks again', async () => {
  await withRunnerSecrets(async ({ client, deletions, stop }) => {
    const gate = gateNextCall(client, 'forgetOrg');
    try {
      assert.equal((await deletions.delete(DOOMED))?.state, 'removing');
      await eventually('the runner asked', () => gate.reached(), Boolean);
      stop.abort();
    } finally {
      gate.done();
    }
    await deletions.idle();
    assert.equal(deletions.get(DOOMED)?.state, 'removing', 'the next start goes on with it');
    assert.deepEqual(await secretsOf(client, DOOMED), [['API_KEY'], ['API_KEY'], ['API_KEY']], 'the call was withdrawn before it was sent');
  });
});

test('a wedged hook-runner does not hold up the ledger\'s part: the org\'s records go while ForgetOrg waits', async () => {
  await withRunnerSecrets(async ({ client, deletions, ledger }) => {
    const gate = gateNextCall(client, 'forgetOrg');
    try {
      assert.equal((await deletions.delete(DOOMED))?.state, 'removing');
      await eventually('the runner asked', () => gate.reached(), Boolean);
      await eventually('the org\'s records removed meanwhile', () => deletions.get(DOOMED)?.removed, (removed) => removed?.['sources'] === 1);
      assert.equal(ledger.sources.get([DOOMED, 'shop']), undefined);
      assert.equal(deletions.get(DOOMED)?.state, 'removing', 'not done before the runner\'s part');
    } finally {
      gate.done();
    }
    await deletions.idle();
    assert.equal(deletions.get(DOOMED)?.state, 'removed');
    assert.deepEqual(deletions.get(DOOMED)?.removed, { sources: 1 });
    assert.deepEqual(await secretsOf(client, DOOMED), [[], [], []]);
  });
});

test('a removal stopped part way keeps the tally of what it removed: the record counts every record once it is finished', async () => {
  const dataDir = tempDir();
  const { ledger, tables, deleted, orgs } = openFenced(dataDir);
  try {
    await orgs.create({ id: DOOMED, name: DOOMED, plan: 'pro', max_concurrent_runs: 4, created_at: new Date().toISOString(), updated_at: new Date().toISOString() }, () => undefined);
    await ledger.root.transaction(() => {
      for (let i = 0; i < 10; i++) ledger.sources.put([DOOMED, `source-${i}`], { name: `source-${i}` });
    });
    const deletionsUntil = (stop: AbortSignal) =>
      new OrgDeletions({ ledger, orgs, deleted, tables, actionIds: () => [], runner: undefined, secretWritesSettled: async () => undefined, onFenced: () => undefined, onRemoved: () => undefined, logger: createLogger('silent'), now: () => Date.now(), stop, chunk: 3 });
    // The stop comes inside the first chunk's transaction: that chunk commits, nothing after it.
    const stop = new AbortController();
    const countRemoved = deleted.countRemoved.bind(deleted);
    deleted.countRemoved = (orgId, table, count) => {
      countRemoved(orgId, table, count);
      if (table === 'sources') stop.abort();
    };
    const first = deletionsUntil(stop.signal);
    await first.delete(DOOMED);
    await first.idle();
    deleted.countRemoved = countRemoved;
    const cut = first.get(DOOMED)!;
    assert.equal(cut.state, 'removing');
    assert.equal(cut.removed['sources'], 3, 'the chunk that committed is counted');
    assert.equal([...ledger.sources.getKeys({ start: [DOOMED] })].filter((key) => (key as string[])[0] === DOOMED).length, 7);

    const next = deletionsUntil(new AbortController().signal);
    assert.equal(await next.finishLeftOver(), 1);
    const done = next.get(DOOMED)!;
    assert.equal(done.state, 'removed');
    assert.deepEqual(done.removed, { sources: 10 }, 'every record counted once, across the stop');
  } finally {
    await ledger.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('orgs deleted while a removal runs are removed together in the next one, each tallied apart, and the orgs kept stay whole', async () => {
  const dataDir = tempDir();
  const { ledger, tables, deleted, orgs } = openFenced(dataDir);
  const ids = ['pass-a', 'pass-b', 'pass-c', 'pass-d', 'kept'];
  try {
    for (const [i, id] of ids.entries()) {
      await orgs.create({ id, name: id, plan: 'pro', max_concurrent_runs: 4, created_at: new Date().toISOString(), updated_at: new Date().toISOString() }, () => undefined);
      await ledger.root.transaction(() => {
        for (let n = 0; n <= i; n++) ledger.sources.put([id, `source-${n}`], { name: `source-${n}` });
        ledger.inboxByTime.put([1_000 + i, id, 'source-0', `e-${i}`], null);
      });
    }
    // Reads of the time-ordered table: a pass reads it whole twice (to remove, to count again), once for all its orgs.
    const { table: byTime } = tables().find(({ name }) => name === 'inbox-by-time')!;
    const { getKeys } = byTime;
    let wholeReads = 0;
    Object.assign(byTime, { getKeys: (...args: Parameters<typeof getKeys>) => (wholeReads++, getKeys.apply(byTime, args)) });
    const countRemoved = deleted.countRemoved.bind(deleted);
    let later: Array<Promise<unknown>> = [];
    const deletions = new OrgDeletions({ ledger, orgs, deleted, tables, actionIds: () => [], runner: undefined, secretWritesSettled: async () => undefined, onFenced: () => undefined, onRemoved: () => undefined, logger: createLogger('silent'), now: () => Date.now(), stop: new AbortController().signal });
    deleted.countRemoved = (orgId, table, count) => {
      countRemoved(orgId, table, count);
      // While pass-a's removal runs, three more orgs are deleted: they wait for the next pass.
      if (orgId === 'pass-a' && later.length === 0) later = ['pass-b', 'pass-c', 'pass-d'].map((id) => deletions.delete(id));
    };
    await deletions.delete('pass-a');
    await deletions.idle();
    await Promise.all(later);
    await deletions.idle();
    assert.equal(wholeReads, 4, 'two passes: pass-a alone, then the three deleted while it ran');
    for (const [i, id] of ids.slice(0, 4).entries()) {
      const record = deletions.get(id);
      assert.equal(record?.state, 'removed', id);
      // Its sources and its one time entry (its org record went with the mark).
      assert.deepEqual(record?.removed, { 'inbox-by-time': 1, sources: i + 1 }, id);
      assert.deepEqual(await deletions.recordsLeft(id), {}, id);
    }
    assert.deepEqual(await deletions.recordsLeft('kept'), { 'inbox-by-time': 1, orgs: 1, sources: 5 });
  } finally {
    await ledger.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a hook-runner of an earlier release, without ForgetOrg: the org\'s secrets are deleted action by action, the deletion finishes, and a warning says to upgrade it', async () => {
  const logged: string[] = [];
  await withRunnerSecrets(async ({ client, deletions }) => {
    // What the client answers for a runner that has no ForgetOrg (UNIMPLEMENTED: client-retries.test.ts).
    client.forgetOrg = async () => undefined;
    assert.equal((await deletions.delete(DOOMED))?.state, 'removing');
    await deletions.idle();
    assert.equal(deletions.get(DOOMED)?.state, 'removed');
    assert.deepEqual(await secretsOf(client, DOOMED), [[], [], []]);
    assert.deepEqual(await secretsOf(client, KEEPER), [['API_KEY'], ['API_KEY'], ['API_KEY']]);
  }, createLogger('warn', (line) => void logged.push(line)));
  assert.equal(logged.length, 1, logged.join(''));
  assert.match(logged[0]!, /without ForgetOrg.*Upgrade the hook-runner/);
});
