// The workflow store on each ledger (LMDB and memory): versions, the trigger index, signing
// secrets, the version cap and paging.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';
import { parseWorkflowInput } from '../../runtime/workflows/parse-workflow.ts';
import { WorkflowStore } from '../../runtime/workflows/workflow-store.ts';
import { MAX_VERSIONS_PER_WORKFLOW } from '../../runtime/workflows/workflow-limits.ts';
import { versionSize } from '../../runtime/workflows/version-bytes.ts';
import type { WorkflowDraft } from '../../runtime/workflows/workflow-types.ts';

const T0 = Date.UTC(2026, 10, 30);
const SECRET_FORMAT = /^whsec_[A-Za-z0-9+/]{43}=$/;
const hook = (url = 'https://example.com/hook') => ({ type: 'webhook', url });
const draftOf = (body: Record<string, unknown>): WorkflowDraft =>
  parseWorkflowInput({ name: 'wf', trigger_event: 'order.placed', steps: [hook()], ...body });
const ids = (versions: readonly { workflow_id: string }[]): string[] => versions.map((v) => v.workflow_id).sort();

for (const kind of LEDGER_KINDS) describe(`WorkflowStore (${kind.name} ledger)`, () => {
  let opened: ReturnType<typeof kind.open>;
  let ledger: Ledger;
  let store: WorkflowStore;
  before(() => {
    opened = kind.open();
    ledger = opened.ledger;
    store = new WorkflowStore(ledger);
  });
  after(() => opened.close());

  test('create stores version 1, a trigger entry and one signing secret', async () => {
    const { workflow, signingSecret } = await store.create(draftOf({ steps: [{ id: 'notify', ...hook() }] }), 'org-a', T0);
    assert.match(workflow.id, /^[0-9a-f-]{36}$/);
    assert.equal(workflow.version, 1);
    assert.equal(workflow.created_at, new Date(T0).toISOString());
    assert.match(signingSecret, SECRET_FORMAT);
    assert.deepEqual(store.signingSecrets('org-a', workflow.id), [signingSecret]);
    assert.deepEqual(store.get('org-a', workflow.id), workflow);
    assert.equal(store.get('org-b', workflow.id), undefined, 'another org never sees it');
    const [match, ...rest] = store.matching('org-a', 'production', 'order.placed');
    assert.equal(rest.length, 0);
    assert.equal(match?.workflow_id, workflow.id);
    assert.equal(match?.version, 1);
    assert.equal(match?.definition.steps[0]?.id, 'notify');
  });

  test('update writes a new version; the old one keeps its steps; matching serves the current one', async () => {
    const { workflow } = await store.create(draftOf({ trigger_event: 'invoice.paid', steps: [{ id: 'a', ...hook('https://a.example/') }] }), 'org-a', T0);
    const edited = parseWorkflowInput({ steps: [{ id: 'a', ...hook('https://a2.example/') }, { type: 'delay', duration: 'PT5M' }] }, workflow);
    const v2 = await store.update('org-a', workflow.id, edited, T0 + 1000);
    assert.equal(v2.version, 2);
    assert.equal(v2.created_at, workflow.created_at);
    assert.equal(v2.updated_at, new Date(T0 + 1000).toISOString());
    const old = store.version('org-a', workflow.id, 1);
    assert.equal(old?.definition.steps.length, 1);
    assert.equal(old?.definition.steps[0]?.type === 'webhook' && old.definition.steps[0].url, 'https://a.example/');
    assert.equal(store.version('org-a', workflow.id, 2)?.definition.steps.length, 2);
    assert.equal(store.version('org-a', workflow.id, 3), undefined);
    const [match] = store.matching('org-a', 'production', 'invoice.paid');
    assert.equal(match?.version, 2);
    assert.equal(match?.definition.steps[0]?.id, 'a', 'a repeated step id is kept');
  });

  test('matching follows disable, enable, trigger changes, and delete', async () => {
    const { workflow } = await store.create(draftOf({ trigger_event: 'cart.open' }), 'org-m', T0);
    const matchIds = (env: string, type: string) => ids(store.matching('org-m', env, type));
    const indexed = () => [...ledger.openDatabase('workflow-triggers').getKeys({ start: ['org-m'], end: ['org-m', '\uffff'] })];
    assert.deepEqual(matchIds('production', 'cart.open'), [workflow.id]);

    let current = await store.setStatus('org-m', workflow.id, 'disabled', T0 + 1);
    assert.equal(current.version, 2);
    assert.deepEqual(matchIds('production', 'cart.open'), []);
    assert.deepEqual(indexed(), [], 'a disabled workflow has no trigger entry');
    assert.equal((await store.setStatus('org-m', workflow.id, 'disabled', T0 + 2)).version, 2, 'same status: no new version');
    current = await store.setStatus('org-m', workflow.id, 'enabled', T0 + 3);
    assert.deepEqual(matchIds('production', 'cart.open'), [workflow.id]);

    current = await store.update('org-m', workflow.id, parseWorkflowInput({ trigger_event: 'cart.closed' }, current), T0 + 4);
    assert.deepEqual(matchIds('production', 'cart.open'), []);
    assert.deepEqual(matchIds('production', 'cart.closed'), [workflow.id]);

    current = await store.update('org-m', workflow.id, parseWorkflowInput({ status: 'disabled', trigger_event: 'cart.x' }, current), T0 + 6);
    assert.deepEqual(matchIds('production', 'cart.closed'), []);
    assert.deepEqual(matchIds('production', 'cart.x'), []);
    current = await store.update('org-m', workflow.id, parseWorkflowInput({ status: 'enabled' }, current), T0 + 7);
    assert.deepEqual(matchIds('production', 'cart.x'), [workflow.id]);
    assert.deepEqual(matchIds('sandbox', 'cart.x'), [], 'nor in the other environment');
    assert.deepEqual(indexed(), [['org-m', 'production', 'cart.x', workflow.id]], 'exactly one entry, for the current trigger');
    assert.equal(current.version, 6);

    await store.delete('org-m', workflow.id, T0);
    assert.deepEqual(matchIds('production', 'cart.x'), []);
    assert.deepEqual(indexed(), [], 'delete leaves no trigger entry behind');
    assert.equal(store.get('org-m', workflow.id), undefined);
    assert.equal(store.version('org-m', workflow.id, 6)?.definition.trigger_event, 'cart.x', 'versions outlive the workflow');
    assert.equal(store.signingSecrets('org-m', workflow.id).length, 1, 'secrets outlive it too, for runs still finishing');
    await assert.rejects(store.delete('org-m', workflow.id, T0), { status: 404, code: 'not_found' });
    await assert.rejects(store.setStatus('org-m', workflow.id, 'enabled', T0), { status: 404 });
  });

  test('matching is exact: no prefix leaks across event types, environments or orgs', async () => {
    const exact = (await store.create(draftOf({ trigger_event: 'order' }), 'org-p', T0)).workflow;
    const longer = (await store.create(draftOf({ trigger_event: 'order.x' }), 'org-p', T0)).workflow;
    const otherOrg = (await store.create(draftOf({ trigger_event: 'order' }), 'org-p-2', T0)).workflow;
    assert.deepEqual(ids(store.matching('org-p', 'production', 'order')), [exact.id]);
    assert.deepEqual(ids(store.matching('org-p', 'production', 'order.x')), [longer.id]);
    assert.deepEqual(ids(store.matching('org-p-2', 'production', 'order')), [otherOrg.id]);
    assert.deepEqual(store.matching('org-p', 'sandbox', 'order'), []);
    assert.deepEqual(store.matching('org-p', 'production', 'orde'), []);
  });

  test('matching still serves trigger entries written before they held the version', async () => {
    const { workflow } = await store.create(draftOf({ trigger_event: 'legacy.trigger' }), 'org-l', T0);
    const updated = await store.update('org-l', workflow.id, draftOf({ trigger_event: 'legacy.trigger', steps: [{ id: 'second', ...hook() }] }), T0 + 1);
    // The older layout: the same key, holding null.
    await ledger.openDatabase('workflow-triggers').put(['org-l', 'production', 'legacy.trigger', workflow.id], null);
    const [match] = store.matching('org-l', 'production', 'legacy.trigger');
    assert.equal(match?.version, updated.version);
    assert.equal(match?.definition.steps[0]?.id, 'second');
    await store.setStatus('org-l', workflow.id, 'disabled', T0 + 2);
    await ledger.openDatabase('workflow-triggers').put(['org-l', 'production', 'legacy.trigger', workflow.id], null);
    assert.deepEqual(store.matching('org-l', 'production', 'legacy.trigger'), [], 'a disabled workflow never matches');
  });

  test('the enabled workflows of one trigger hold at most their byte cap together; disabled ones, other triggers and shrinking pass', async () => {
    const capped = new WorkflowStore(ledger, { triggerBytes: 100_000 });
    // About 30 KB each: a header value of 1,000 characters on 25 steps.
    const stepsOf = (count: number, prefix: string) => Array.from({ length: count }, (_, i) => ({ id: `${prefix}${i}`, ...hook(), headers: { 'x-note': 'n'.repeat(1000) } }));
    const steps = stepsOf(25, 's');
    const big = (body: Record<string, unknown> = {}) => draftOf({ trigger_event: 'big.event', steps, ...body });
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await capped.create(big({ name: `big-${i}` }), 'org-cap-t', T0)).workflow);
    const size = versionSize(capped.version('org-cap-t', made[0]!.id, 1)!);
    assert.ok(size > 25_000 && 3 * size < 100_000 && 4 * size > 100_000, `${size} bytes each`);

    const refused = { status: 409, code: 'trigger_size_limit_reached', message: /event type "big\.event" in production may hold at most 0\.10 MiB of JSON together/ };
    await assert.rejects(capped.create(big({ name: 'fourth' }), 'org-cap-t', T0), refused);
    assert.equal([...capped.newestFirst('org-cap-t', 'production')].length, 3, 'the refused create wrote nothing');
    const parked = (await capped.create(big({ name: 'parked', status: 'disabled' }), 'org-cap-t', T0)).workflow;
    await assert.rejects(capped.setStatus('org-cap-t', parked.id, 'enabled', T0 + 1), refused);
    assert.equal(capped.get('org-cap-t', parked.id)?.version, 1, 'the refused enable wrote no version');
    await capped.create(big({ name: 'elsewhere', trigger_event: 'other.event' }), 'org-cap-t', T0);
    await capped.create(big({ name: 'sandboxed', environment: 'sandbox' }), 'org-cap-t', T0);
    await capped.create(big({ name: 'other org' }), 'org-cap-u', T0);
    await assert.rejects(capped.update('org-cap-t', parked.id, parseWorkflowInput({ status: 'enabled' }, parked), T0 + 2), refused);
    await assert.rejects(capped.update('org-cap-t', made[0]!.id, parseWorkflowInput({ steps: [...steps, ...stepsOf(20, 'more')] }, made[0]), T0 + 2), refused);
    const shrunk = await capped.update('org-cap-t', made[0]!.id, parseWorkflowInput({ steps: steps.slice(0, 5) }, made[0]), T0 + 3);
    assert.equal(shrunk.version, 2, 'a version that grows nothing goes through');
    await capped.setStatus('org-cap-t', made[1]!.id, 'disabled', T0 + 4);
    assert.equal((await capped.setStatus('org-cap-t', parked.id, 'enabled', T0 + 5)).status, 'enabled', 'room made by a disable is room');
    assert.deepEqual(ids(capped.matching('org-cap-t', 'production', 'big.event')), [made[0]!.id, made[2]!.id, parked.id].sort());

    // An entry of an older layout (a bare version, or null) is weighed from its version.
    await ledger.openDatabase('workflow-triggers').put(['org-cap-t', 'production', 'big.event', made[2]!.id], 1);
    await ledger.openDatabase('workflow-triggers').put(['org-cap-t', 'production', 'big.event', parked.id], null);
    await capped.setStatus('org-cap-t', made[1]!.id, 'enabled', T0 + 6);
    await assert.rejects(capped.create(big({ name: 'one more' }), 'org-cap-t', T0), refused);

    // Over a cap lowered since (a store with a smaller one on the same data): shrinking still passes.
    const tighter = new WorkflowStore(ledger, { triggerBytes: 50_000 });
    const latest = tighter.get('org-cap-t', made[2]!.id)!;
    assert.equal((await tighter.update('org-cap-t', latest.id, parseWorkflowInput({ steps: steps.slice(0, 20) }, latest), T0 + 7)).version, 2);
  });

  test('at most the cap of enabled workflows listen to one trigger; updating one of them, disabled ones, other triggers and other orgs pass', async () => {
    const capped = new WorkflowStore(ledger, { triggerWorkflows: 3 });
    const on = (body: Record<string, unknown> = {}) => draftOf({ trigger_event: 'fan.event', ...body });
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await capped.create(on({ name: `fan-${i}` }), 'org-fan', T0)).workflow);
    const refused = { status: 409, code: 'trigger_workflow_limit_reached', message: /^At most 3 enabled workflows may listen to event type "fan\.event" in production .*; 3 already do\./ };
    await assert.rejects(capped.create(on({ name: 'fourth' }), 'org-fan', T0), refused);
    assert.equal([...capped.newestFirst('org-fan', 'production')].length, 3, 'the refused create wrote nothing');
    const parked = (await capped.create(on({ name: 'parked', status: 'disabled' }), 'org-fan', T0)).workflow;
    await assert.rejects(capped.setStatus('org-fan', parked.id, 'enabled', T0 + 1), refused);
    await assert.rejects(capped.update('org-fan', parked.id, parseWorkflowInput({ status: 'enabled' }, parked), T0 + 1), refused);
    const moved = (await capped.create(on({ name: 'elsewhere', trigger_event: 'other.event' }), 'org-fan', T0)).workflow;
    await assert.rejects(capped.update('org-fan', moved.id, parseWorkflowInput({ trigger_event: 'fan.event' }, moved), T0 + 1), refused);
    await capped.create(on({ name: 'sandboxed', environment: 'sandbox' }), 'org-fan', T0);
    await capped.create(on({ name: 'other org' }), 'org-fan-other', T0);
    assert.equal((await capped.update('org-fan', made[0]!.id, parseWorkflowInput({ name: 'renamed' }, made[0]), T0 + 2)).version, 2, 'one already listening does not count twice');
    await capped.setStatus('org-fan', made[1]!.id, 'disabled', T0 + 3);
    assert.equal((await capped.setStatus('org-fan', parked.id, 'enabled', T0 + 4)).status, 'enabled', 'room made by a disable is room');
    assert.deepEqual(ids(capped.matching('org-fan', 'production', 'fan.event')), [made[0]!.id, made[2]!.id, parked.id].sort());
  });

  test('an org keeps at most its cap of version bytes, deleted workflows\' included until pruned; disabling always passes; an uncounted org is counted from its versions', async () => {
    const org = 'org-bytes';
    const first = await store.create(draftOf({ name: 'v' }), org, T0);
    const size = versionSize(store.version(org, first.workflow.id, 1)!);
    // Room for three versions of this size, not four.
    const capped = new WorkflowStore(ledger, { orgVersionBytes: Math.floor(3.5 * size) });
    const second = await capped.update(org, first.workflow.id, parseWorkflowInput({ name: 'v2' }, first.workflow), T0 + 1);
    const third = await capped.update(org, second.id, parseWorkflowInput({ name: 'v3' }, second), T0 + 2);
    const refused = { status: 409, code: 'workflow_storage_limit_reached', message: /^An organization's workflow versions may hold at most .*; they hold .* and this version .*Delete workflows you no longer use; disabling one always works\.$/ };
    await assert.rejects(capped.update(org, third.id, parseWorkflowInput({ name: 'v4' }, third), T0 + 3), refused);
    await assert.rejects(capped.create(draftOf({ name: 'another' }), org, T0 + 3), refused);
    assert.equal(capped.get(org, third.id)?.version, 3, 'the refused update wrote nothing');
    const bigger = parseWorkflowInput({ status: 'disabled', steps: Array.from({ length: 10 }, (_, i) => ({ id: `s${i}`, ...hook(), headers: { 'x-note': 'n'.repeat(500) } })) }, third);
    await assert.rejects(capped.update(org, third.id, bigger, T0 + 4), refused, 'a disable that also changes the definition is counted');
    const disabled = await capped.setStatus(org, third.id, 'disabled', T0 + 4);
    assert.equal(disabled.version, 4, 'disabling goes through at the cap');
    await assert.rejects(capped.setStatus(org, third.id, 'enabled', T0 + 5), refused);
    await capped.create(draftOf({ name: 'elsewhere' }), 'org-bytes-other', T0 + 5);

    // Counted again from the versions when no count is stored (an org from before the count): the same refusal.
    const detail = async (): Promise<unknown> => (await capped.setStatus(org, third.id, 'enabled', T0 + 6).catch((error: { details?: unknown }) => error.details));
    const counted = await detail();
    assert.ok(((counted as { used_bytes?: number }).used_bytes ?? 0) > 3 * size, `four versions counted: ${JSON.stringify(counted)}`);
    await ledger.root.transaction(() => ledger.openDatabase('workflow-org-bytes').remove([org]));
    assert.deepEqual(await detail(), counted);

    // A deleted workflow's versions count until they are pruned, then make room.
    await capped.delete(org, third.id, T0 + 7);
    await assert.rejects(capped.create(draftOf({ name: 'after delete' }), org, T0 + 8), refused);
    assert.equal(await capped.deleted.remove({ orgId: org, workflowId: third.id }), 4);
    assert.equal((await capped.create(draftOf({ name: 'after prune' }), org, T0 + 9)).workflow.version, 1);
  });

  test('prunes of a deleted workflow running at once subtract its versions from the org\'s bytes once', async () => {
    const org = 'org-bytes-prune';
    const kept = await store.create(draftOf({ name: 'kept' }), org, T0);
    const gone = await store.create(draftOf({ name: 'gone' }), org, T0);
    await store.update(org, gone.workflow.id, parseWorkflowInput({ name: 'gone again' }, gone.workflow), T0 + 1);
    await store.delete(org, gone.workflow.id, T0 + 2);
    const workflow = { orgId: org, workflowId: gone.workflow.id };
    await Promise.all([store.deleted.remove(workflow), store.deleted.remove(workflow)]);
    assert.equal(ledger.openDatabase('workflow-org-bytes').get([org]), versionSize(store.version(org, kept.workflow.id, 1)!), 'the kept workflow\'s version alone');
  });

  test('matching reads inside a write transaction and sees that transaction\'s writes', async () => {
    const { workflow } = await store.create(draftOf({ trigger_event: 'txn.seen' }), 'org-t', T0);
    const seen = await ledger.root.transaction(() => store.matching('org-t', 'production', 'txn.seen').map((v) => v.workflow_id));
    assert.deepEqual(seen, [workflow.id]);
  });

  test('rotation puts the new secret first, keeps the previous one, and drops older ones', async () => {
    const { workflow, signingSecret: first } = await store.create(draftOf({}), 'org-r', T0);
    const { signingSecret: second } = await store.rotateSigningSecret('org-r', workflow.id, T0 + 1);
    assert.match(second, SECRET_FORMAT);
    assert.notEqual(second, first);
    assert.deepEqual(store.signingSecrets('org-r', workflow.id), [second, first]);
    const { signingSecret: third } = await store.rotateSigningSecret('org-r', workflow.id, T0 + 2);
    assert.deepEqual(store.signingSecrets('org-r', workflow.id), [third, second]);
    assert.deepEqual(store.signingSecrets('org-x', workflow.id), []);
    await assert.rejects(store.rotateSigningSecret('org-x', workflow.id, T0), { status: 404 });
  });

  test('a rotation sent again with its Idempotency-Key answers the secret it made and drops nothing; another key rotates', async () => {
    const { workflow, signingSecret: first } = await store.create(draftOf({}), 'org-rk', T0);
    const made = await store.rotateSigningSecret('org-rk', workflow.id, T0 + 1, 'rot-1');
    assert.equal(made.earlier, false);
    const again = await store.rotateSigningSecret('org-rk', workflow.id, T0 + 2, 'rot-1');
    assert.deepEqual(again, { signingSecret: made.signingSecret, earlier: true });
    assert.deepEqual(store.signingSecrets('org-rk', workflow.id), [made.signingSecret, first], 'the first secret still signs');
    const next = await store.rotateSigningSecret('org-rk', workflow.id, T0 + 3, 'rot-2');
    assert.equal(next.earlier, false);
    assert.deepEqual(store.signingSecrets('org-rk', workflow.id), [next.signingSecret, made.signingSecret]);
    // Without a key, every rotation rotates.
    const unkeyed = await store.rotateSigningSecret('org-rk', workflow.id, T0 + 4);
    assert.deepEqual(store.signingSecrets('org-rk', workflow.id), [unkeyed.signingSecret, next.signingSecret]);
  });

  test('an update based on a stale version is refused when ifVersion is given', async () => {
    const { workflow } = await store.create(draftOf({}), 'org-c', T0);
    await store.update('org-c', workflow.id, parseWorkflowInput({ name: 'first' }, workflow), T0 + 1, { ifVersion: 1 });
    await assert.rejects(store.update('org-c', workflow.id, parseWorkflowInput({ name: 'second' }, workflow), T0 + 2, { ifVersion: 1 }), {
      status: 409,
      code: 'workflow_version_conflict',
    });
    assert.equal(store.get('org-c', workflow.id)?.name, 'first');
    assert.equal(store.version('org-c', workflow.id, 3), undefined);
  });

  test('a workflow takes at most 1,000 versions: the next update or enable is 409, but it can still be disabled (by an update that only disables too)', async () => {
    const { workflow } = await store.create(draftOf({}), 'org-cap', T0);
    let current = workflow;
    while (current.version < MAX_VERSIONS_PER_WORKFLOW) current = await store.update('org-cap', workflow.id, parseWorkflowInput({ name: `v${current.version + 1}` }, current), T0);
    await assert.rejects(store.update('org-cap', workflow.id, parseWorkflowInput({ name: 'one too many' }, current), T0), { code: 'version_limit_reached' });
    assert.equal(store.get('org-cap', workflow.id)?.version, MAX_VERSIONS_PER_WORKFLOW);
    // An update that disables and changes something else is refused too; one that only disables is not.
    await assert.rejects(store.update('org-cap', workflow.id, parseWorkflowInput({ status: 'disabled', name: 'and renamed' }, current), T0), { code: 'version_limit_reached' });
    const disabled = await store.update('org-cap', workflow.id, parseWorkflowInput({ status: 'disabled' }, current), T0);
    assert.deepEqual([disabled.status, disabled.version], ['disabled', MAX_VERSIONS_PER_WORKFLOW + 1]);
    await assert.rejects(store.setStatus('org-cap', workflow.id, 'enabled', T0), { code: 'version_limit_reached' });
    assert.equal(store.get('org-cap', workflow.id)?.status, 'disabled');
  });

  test('versions page newest first; list holds every workflow of the environment; odd ids read as absent', async () => {
    const { workflow } = await store.create(draftOf({}), 'org-v', T0);
    let current = workflow;
    for (let i = 2; i <= 5; i++) current = await store.update('org-v', workflow.id, parseWorkflowInput({ name: `v${i}` }, current), T0 + i);
    assert.deepEqual([...store.versions('org-v', workflow.id)].map((v) => v.version), [5, 4, 3, 2, 1]);
    assert.deepEqual([...store.versions('org-v', workflow.id, 4)].map((v) => v.version), [3, 2, 1]);
    assert.deepEqual([...store.versions('org-v', workflow.id, 1)], []);
    const later = (await store.create(draftOf({}), 'org-v', T0 + 60_000)).workflow;
    const sameTime = (await store.create(draftOf({}), 'org-v', T0 + 60_000)).workflow;
    const newest = [...store.newestFirst('org-v', 'production')].map((w) => w.id);
    assert.deepEqual(newest, [...[later.id, sameTime.id].sort().reverse(), workflow.id], 'newest created first, ties by id descending');
    assert.deepEqual([...store.newestFirst('org-v', 'production', [later.created_at, newest[0]!])].map((w) => w.id), newest.slice(1), 'after a cursor');
    assert.deepEqual([...store.newestFirst('org-v', 'sandbox')], [], 'the other environment');
    await store.delete('org-v', sameTime.id, T0);
    assert.deepEqual([...store.newestFirst('org-v', 'production')].map((w) => w.id), newest.filter((id) => id !== sameTime.id), 'a deleted one is not listed');
    assert.equal(store.get('org-v', 'x'.repeat(5000)), undefined);
    assert.equal(store.version('org-v', workflow.id, 0), undefined);
    assert.deepEqual(store.signingSecrets('org-v', 'not-a-uuid'), []);
  });
});

describe('WorkflowStore pinned-version cache', () => {
  test('decoded versions are held within their byte bound; matching still answers every workflow, read again as needed', async () => {
    const kind = LEDGER_KINDS[0]!;
    const opened = kind.open();
    try {
      const bound = { max: 4096, maxBytes: 100_000 };
      const store = new WorkflowStore(opened.ledger, { pinnedCache: bound });
      // Ten workflows of about 30 KB each (a header value of 1,000 characters on 25 steps).
      const steps = Array.from({ length: 25 }, (_, i) => ({ id: `s${i}`, ...hook(), headers: { 'x-note': 'n'.repeat(1000) } }));
      const made: string[] = [];
      for (let i = 0; i < 10; i++) made.push((await store.create(draftOf({ name: `big-${i}`, trigger_event: 'big.event', steps }), 'org-big', T0)).workflow.id);
      for (let round = 0; round < 2; round++) {
        const matches = store.matching('org-big', 'production', 'big.event');
        assert.deepEqual(ids(matches), [...made].sort(), 'every matching workflow, whole');
        assert.ok(matches.every((v) => v.definition.steps.length === 25));
        const held = store.pinnedHeld;
        assert.ok(held.bytes <= bound.maxBytes, `${held.bytes} bytes held`);
        assert.ok(held.versions >= 1 && held.versions <= 4, `${held.versions} versions of about 30 KB held within 100,000 bytes`);
      }
    } finally {
      await opened.close();
    }
  });
});

describe('WorkflowStore reads on LMDB', () => {
  test('reading a deleted workflow\'s newest version again and again, between writes, leaves no LMDB reader behind', async () => {
    const opened = LEDGER_KINDS[0]!.open();
    try {
      const store = new WorkflowStore(opened.ledger);
      const { workflow } = await store.create(draftOf({ trigger_event: 'gone.soon' }), 'org-readers', T0);
      await store.delete('org-readers', workflow.id, T0);
      let busy = (await store.create(draftOf({ trigger_event: 'kept' }), 'org-readers', T0)).workflow;
      // Past the default reader table (126): a read left open per turn would fail with MDB_READERS_FULL.
      for (let i = 0; i < 300; i++) {
        assert.equal(store.newestVersion('org-readers', workflow.id)?.version, 1);
        assert.equal([...store.versions('org-readers', workflow.id)].length, 1);
        for (const version of store.versions('org-readers', busy.id)) if (version.version > 0) break;
        busy = await store.update('org-readers', busy.id, parseWorkflowInput({ name: `n${i}` }, busy), T0 + i);
      }
    } finally {
      await opened.close();
    }
  });
});

describe('WorkflowStore (lmdb ledger): a version read while its write is in progress', () => {
  const kind = LEDGER_KINDS[0]!;
  let opened: ReturnType<typeof kind.open>;
  before(() => {
    opened = kind.open();
  });
  after(() => opened.close());

  test('is not kept once that write fails to commit: the version number then names what is stored', async () => {
    const { ledger } = opened;
    const { root } = ledger;
    let sneak: () => void = () => undefined;
    let failing = false;
    // A commit that fails after its body ran (a full disk), read from inside it meanwhile as a
    // transaction batched with it (ingest's, calling matching) reads it.
    const failingRoot = {
      ...root,
      transaction: <T>(body: () => T) =>
        root.transaction(() => {
          const result = body();
          if (!failing) return result;
          sneak();
          throw new Error('commit failed');
        }),
    };
    Object.defineProperty(failingRoot, 'flushed', { get: () => root.flushed });
    const store = new WorkflowStore({ ...ledger, root: failingRoot } as Ledger);
    const { workflow } = await store.create(draftOf({}), 'org-fail', T0);
    let readDuringWrite: string | undefined;
    sneak = () => {
      const version = store.version('org-fail', workflow.id, 2);
      readDuringWrite = (version?.definition.steps[0] as { url?: string } | undefined)?.url;
    };
    failing = true;
    await assert.rejects(store.update('org-fail', workflow.id, parseWorkflowInput({ steps: [hook('https://never-saved.example.com/hook')] }, workflow), T0 + 1), /commit failed/);
    failing = false;
    assert.equal(readDuringWrite, 'https://never-saved.example.com/hook', 'the write\'s own version was read meanwhile');
    assert.equal(store.version('org-fail', workflow.id, 2), undefined, 'nothing of the failed write is kept');
    const saved = await store.update('org-fail', workflow.id, parseWorkflowInput({ steps: [hook('https://saved.example.com/hook')] }, workflow), T0 + 2);
    assert.equal(saved.version, 2);
    assert.equal((store.version('org-fail', workflow.id, 2)?.definition.steps[0] as { url: string }).url, 'https://saved.example.com/hook');
    assert.equal((store.matching('org-fail', 'production', 'order.placed')[0]?.definition.steps[0] as { url: string }).url, 'https://saved.example.com/hook');
  });

  test('other versions of the org are still kept while a write is in progress: a busy org\'s cache warms', async () => {
    const writer = new WorkflowStore(opened.ledger);
    const { workflow: a } = await writer.create(draftOf({ name: 'a' }), 'org-busy', T0);
    const { workflow: b } = await writer.create(draftOf({ name: 'b' }), 'org-busy', T0);
    const cold = new WorkflowStore(opened.ledger);
    const updating = cold.update('org-busy', b.id, parseWorkflowInput({ steps: [hook('https://b2.example.com/hook')] }, b), T0 + 1);
    assert.equal(cold.version('org-busy', a.id, 1)?.version, 1);
    assert.equal(cold.pinnedHeld.versions, 1, 'kept, though a write of the org is in progress');
    await updating;
  });
});
